"""The documentation site builds, strictly, and the README is a PyPI description.

* ``mkdocs build --strict`` of ``mkdocs.yml`` (what ``make docs`` runs) into a temporary folder succeeds, every
  API page holds its objects and shows no raw Sphinx markup (``docs/_hooks.py``); and the same settings *fail* on a
  broken link, a missing cross-reference and an API page whose module cannot be collected (small projects made
  here, so that the first test cannot pass by checking nothing);
* the hook's functions themselves, on HTML written here;
* the README: at most 200 lines, rendered by ``readme_renderer`` as PyPI renders it, with no relative link or
  image (PyPI cannot resolve them), and ``twine check --strict`` passes on the sdist ``python -m build`` makes.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 200
API_PAGES = {"speechblocks": "speechblocks.audio", "parity": "speechblocks.parity.ParityReport",
             "tf_layers": "tf_layers.Tacotron2", "torch_layers": "torch_layers.Tacotron2"}
RAW_ROLE = re.compile(r":(?:py:)?(?:meth|class|func|attr|data|mod|exc|obj):<code>|:(?:meth|class|func|attr|data|mod):`")


def _hooks():
    spec = importlib.util.spec_from_file_location("speechblocks_docs_hooks", os.path.join(ROOT, "docs", "_hooks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mkdocs_build(config: str, site: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config, "--site-dir", site],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


# -- the site ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("site"))
    done = mkdocs_build(os.path.join(ROOT, "mkdocs.yml"), out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{(done.stdout + done.stderr)[-6000:]}"
    return out


def test_site_builds_strictly_with_every_api_page(site):
    assert os.path.isfile(os.path.join(site, "index.html"))
    for page, anchor in API_PAGES.items():
        html = open(os.path.join(site, "api", page, "index.html"), encoding="utf-8").read()
        assert f'id="{anchor}"' in html, f"api/{page}: no {anchor} documented"


def test_api_pages_show_no_raw_sphinx_markup(site):
    config = yaml.safe_load(open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8"))
    assert "docs/_hooks.py" in (config.get("hooks") or []), "mkdocs.yml: add `hooks: [docs/_hooks.py]`"
    for page in API_PAGES:
        html = open(os.path.join(site, "api", page, "index.html"), encoding="utf-8").read()
        raw = [html[max(0, m.start() - 60):m.end() + 40] for m in RAW_ROLE.finditer(html)]
        assert not raw, f"api/{page}: {len(raw)} raw Sphinx roles, e.g. {raw[:3]}"
        literal = re.findall(r".{0,60}::</(?:p|li|td|dd)>", html)
        assert not literal, f"api/{page}: a paragraph still ends in '::': {literal[:3]}"
        assert "sb-role" not in html  # every tagged role resolved to a link or plain code


def _small_project(tmp_path, pages: dict[str, str]) -> str:
    """A project with mkdocs.yml's own settings (strict, validation, extensions, plugins, hooks) and these pages."""
    config = yaml.safe_load(open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text, encoding="utf-8")
    config.update(docs_dir=str(docs), nav=[{n[:-3]: n} for n in pages])
    config["hooks"] = [os.path.join(ROOT, h) for h in config.get("hooks") or []]
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            ext["pymdownx.snippets"]["base_path"] = [ROOT]
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            python = plugin["mkdocstrings"]["handlers"]["python"]
            python["paths"] = [ROOT]
            python["options"]["extensions"] = [os.path.join(ROOT, e) for e in python["options"].get("extensions", [])]
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("case, page, message", [
    ("broken link", "See [the page](no-such-page.md).\n", "no-such-page.md"),
    ("missing reference", "See [Tacotron2][torch_layers.NoSuchThing].\n", "torch_layers.NoSuchThing"),
    ("an API page that fails to import", "::: speechblocks.no_such_module\n", "speechblocks.no_such_module"),
])
def test_the_strict_build_fails_on(case, page, message, tmp_path):
    config = _small_project(tmp_path, {"index.md": "# Home\n\n" + page})
    done = mkdocs_build(config, str(tmp_path / "site"), timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode != 0, f"{case}: the strict build passed:\n{out[-3000:]}"
    assert message in out, f"{case}: the failure does not name {message!r}:\n{out[-3000:]}"


# -- the hook ---------------------------------------------------------------------------------------------------------

def test_hook_renders_sphinx_roles_as_code_and_links():
    hooks = _hooks()
    html = ('<h2 id="torch_layers.Tacotron2">Tacotron2</h2>'
            '<p>See :meth:<code>from_migrated</code>, :class:<code>~torch_layers.Prenet</code>, '
            ':func:<code>the step &lt;torch_layers.decoder_step&gt;</code>, :class:<code>torch.nn.Module</code> and '
            ':py:attr:<code>.tf1_scope</code>; the maths::</p><pre><code>a::b</code></pre>'
            '<p>Then ::</p><p>x: <code>std::</code></p>')
    out = hooks.render_roles(html)
    assert ":meth:" not in out and ":class:" not in out and ":func:" not in out and ":py:attr:" not in out
    assert "the maths:</p>" in out and "<p>Then</p>" in out
    assert "a::b" in out and "<code>std::</code>" in out  # code is left alone
    tags = {m["text"]: (m["target"], m["context"]) for m in hooks._TAGGED.finditer(out)}
    assert tags == {"from_migrated": ("from_migrated", "torch_layers.Tacotron2"),
                    "Prenet": ("torch_layers.Prenet", "torch_layers.Tacotron2"),
                    "the step": ("torch_layers.decoder_step", "torch_layers.Tacotron2"),
                    "torch.nn.Module": ("torch.nn.Module", "torch_layers.Tacotron2"),
                    "tf1_scope": ("tf1_scope", "torch_layers.Tacotron2")}

    known = {"torch_layers", "torch_layers.Tacotron2", "torch_layers.Tacotron2.from_migrated", "torch_layers.Prenet",
             "tf_layers.Prenet", "tf_layers.Tacotron2.from_migrated"}
    linked = hooks.link_roles(out, known)
    assert '<autoref identifier="torch_layers.Tacotron2.from_migrated" optional><code>from_migrated</code></autoref>' \
        in linked  # the method of the enclosing class, not tf_layers' namesake
    assert '<autoref identifier="torch_layers.Prenet" optional><code>Prenet</code></autoref>' in linked
    assert "<code>torch.nn.Module</code>" in linked and "<code>tf1_scope</code>" in linked  # not documented: code
    assert "sb-role" not in linked


def test_hook_resolves_like_sphinx():
    resolve = _hooks().resolve
    known = {"speechblocks.audio", "speechblocks.audio.melspectrogram", "torch_layers.Tacotron2",
             "torch_layers.Tacotron2.synthesize", "tf_layers.Tacotron2.synthesize", "torch_layers.TFBatchNorm"}
    assert resolve("melspectrogram", "speechblocks.audio.recording_features", known) == \
        "speechblocks.audio.melspectrogram"
    assert resolve("Tacotron2.synthesize", "torch_layers.Tacotron1", known) == "torch_layers.Tacotron2.synthesize"
    assert resolve("Tacotron2.synthesize", "speechblocks.audio", known) is None  # two namesakes, neither preferred
    assert resolve("torch_layers.tf_batch_norm.TFBatchNorm", "torch_layers.CBHG", known) == "torch_layers.TFBatchNorm"
    assert resolve("numpy.ndarray", "speechblocks.audio", known) is None


# -- the README as the PyPI description -------------------------------------------------------------------------------

def pypi_problems(markdown: str) -> list[str]:
    """What would not render on PyPI: a failed rendering, relative links and images."""
    from readme_renderer.markdown import render

    html = render(markdown, variant="GFM")
    if html is None:
        return ["readme_renderer could not render it"]
    targets = re.findall(r'<(?:a|img)\b[^>]*?\b(?:href|src)="([^"]*)"', html)
    return [f"a relative link or image: {t!r}" for t in targets if not re.match(r"(https?:|mailto:|#)", t)]


def test_readme_is_one_screenful_and_renders_for_pypi():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md: {len(text.splitlines())} lines"
    assert not pypi_problems(text), pypi_problems(text)
    # the check itself catches what PyPI cannot show
    assert pypi_problems("# x\n\n![a plot](docs/alignment.png) and [the docs](docs/index.md)\n") == [
        "a relative link or image: 'docs/alignment.png'", "a relative link or image: 'docs/index.md'"]


def test_twine_check_passes_on_the_sdist(tmp_path):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path), ROOT]
    built = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    sdists = [str(p) for p in tmp_path.glob("*.tar.gz")]
    assert len(sdists) == 1
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *sdists], env=env,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "PASSED" in checked.stdout, checked.stdout + checked.stderr
