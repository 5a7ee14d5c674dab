"""What a block cannot do under a deployment check, pinned with a reason: shared by ``run_keras_layer_test`` and
``run_torch_module_test`` (each adds its framework's own kinds: ``SelectOps``; ``StaticTime``,
``RecompilesPerLength``). A pinned failure is asserted: a pin that starts working fails the test."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """A documented limit of a block under one deployment check; ``reason`` (why) is required."""

    reason: str

    def __post_init__(self):
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError(f"{type(self).__name__} needs a reason string")


@dataclass(frozen=True)
class Skip(Limit):
    """The check does not run (e.g. the output is random in inference, so nothing to compare)."""


@dataclass(frozen=True)
class Fails(Limit):
    """The check must fail, with ``match`` in ``"ExceptionType: message"`` (the documented failure)."""

    match: str = ""


def expect_failure(limit: Fails, what: str, fn) -> None:
    """Runs ``fn``: it must raise, mentioning ``limit.match``; if it works, the pin is out of date."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 -- the documented failure, whatever its type
        text = f"{type(e).__name__}: {e}"
        assert limit.match in text, f"{what}: expected a failure mentioning {limit.match!r}; got {text[:2000]}"
        return
    raise AssertionError(f"{what} was pinned as failing ({limit.reason}) but now works: update the pin and the "
                         "docstring")


def checked_elsewhere(where: str, checks: tuple[str, ...]) -> dict[str, Skip]:
    """``{check: Skip}`` for a parametrized contract test whose other configuration runs the deployment checks on the
    same ops (one export per block keeps ``make test`` within its time budget)."""
    skip = Skip(f"the deployment checks run in {where}: the same ops in another configuration")
    return {check: skip for check in checks}
