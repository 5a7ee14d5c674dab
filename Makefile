# speechblocks — every target depends on `install`, so a fresh clone needs only `make demo` / `make test`.
PY      := .venv/bin/python
PIP     := .venv/bin/pip
STAMP   := .venv/.installed
PINS    := tensorflow-cpu==2.21.0 torch==2.13.0 tf_keras==2.21.0
JOBS    ?= 2
# the deployment checks' runtimes (setup.cfg extra `export`), pinned: the export tests pin what converts
EXPORT  := onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.32.0 ai-edge-litert==2.3.0
# the audio front-end (setup.cfg extra `audio`), pinned
AUDIO   := librosa==0.11.0 soundfile==0.14.0 soxr==1.1.0 webrtcvad-wheels==2.0.14.post1
# the recogniser of `speechblocks evaluate` (setup.cfg extra `eval`), pinned: its word error rates are tested
EVAL    := pocketsphinx==5.1.1 jiwer==4.0.0
# the documentation site and the PyPI description check (setup.cfg extra `docs`), pinned
DOCS    := mkdocs==1.6.1 mkdocs-material==9.8.1 mkdocstrings==1.0.8 mkdocstrings-python==2.0.11 twine==7.0.0 build==1.6.1 'readme_renderer[md]==46.0'
# real pretrained GE2E weights: resemblyzer's wheel ships them (its dependencies are not needed)
GE2E    := .venv/assets/resemblyzer/pretrained.pt

.PHONY: install test parity demo train-demo finetune-demo bench docs lint clean

install: $(STAMP)

DEPS    := $(PINS) numpy scipy scikit-learn pytest hypothesis pytest-xdist ruff h5py matplotlib unidecode inflect \
	$(EXPORT) $(AUDIO) $(DOCS) $(EVAL)
# uv resolves and installs the same pins in ~30 s (pip: ~2.5 min of a 15-minute CI budget). uv does not read pip's
# configuration: the local CPU wheel of torch is found through pip's find-links; pip is the fallback.
UV      := .venv/bin/uv
FIND    := $(or $(PIP_FIND_LINKS),$(wildcard /opt/wheels))

$(STAMP): setup.cfg setup.py pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	($(PIP) install --quiet uv==0.13.9 && $(UV) pip install --quiet --python $(PY) $(if $(FIND),--find-links $(FIND)) \
		$(DEPS)) || $(PIP) install --quiet $(DEPS)
	$(PIP) install --quiet --no-deps -e .
	$(PY) -m speechblocks.assets ge2e $(GE2E) || echo "note: no pretrained GE2E weights (PyPI unreachable?); make demo embeds with random weights"
	touch $(STAMP)

# Where PYTHONDONTWRITEBYTECODE is set (this machine and CI), Python writes no .pyc: every process of the run (the
# xdist workers, the TF1 reference servers, the ~40 tests that start a subprocess) compiled TensorFlow, Keras and
# torch from source again (~15 s of CPU each: `import tensorflow, keras, torch` 26.9 s of CPU without .pyc files,
# 11.5 s with). The test run lets the first importer write them; every later process reads them.
test: install
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(JOBS) -q

parity: install
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/speechblocks parity

demo: install
	@command -v flite >/dev/null || (command -v apt-get >/dev/null && apt-get install -y -q flite >/dev/null 2>&1) \
		|| echo "note: flite unavailable (no apt-get): the demo's reference recording is a synthetic voice"
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m parity_tests.demo

# a small Tacotron-2 trained from scratch on a flite corpus until a recogniser understands its held-out sentences
# (speechblocks evaluate's scores after each chunk; at most 60 minutes on 2 cores; not in test)
train-demo: install
	@command -v flite >/dev/null || (command -v apt-get >/dev/null && apt-get install -y -q flite >/dev/null 2>&1) \
		|| (echo "make train-demo needs flite (apt-get install flite)"; exit 1)
	$(PY) -m bench.train_demo

# the trained demo model fine-tuned on 5 minutes of another flite voice (awb; at most 15 minutes; after train-demo)
finetune-demo: install
	@command -v flite >/dev/null || (command -v apt-get >/dev/null && apt-get install -y -q flite >/dev/null 2>&1) \
		|| (echo "make finetune-demo needs flite (apt-get install flite)"; exit 1)
	$(PY) -m bench.train_demo --finetune awb

bench: install
	$(PY) -m bench --runs 3

# the documentation site (MkDocs, Material theme, API reference from the docstrings) into site/; --strict: a broken
# link, a missing reference or an API page that fails to import fails the build (tests/test_docs.py runs the same)
docs: install
	$(PY) -m mkdocs build --strict --site-dir site

lint: install
	.venv/bin/ruff check .

clean:
	rm -rf .venv build site *.egg-info .pytest_cache
