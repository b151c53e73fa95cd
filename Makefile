# The two commands of the README: `make demo` and `make test`. Both install what is missing first.

CARGO ?= cargo
WASM_DIR := target/wasm32-wasip2/release
# Glue functions and test guests, built to WebAssembly components.
GUESTS := echo forward crop select tts-frame ocr-detect ocr-recognize fan-out classify caption detect-objects speak-caption jig-probe jig-malformed jig-http-noop

.PHONY: demo cluster-demo test lint test-gpu setup functions examples paper-apps build release bench soak fuzz clean check-manifests docs

setup:
	@scripts/setup.sh

functions: setup
	$(CARGO) build --release --target wasm32-wasip2 $(addprefix -p ,$(GUESTS))

# Example bundles carry their glue and models: copy the built components and the set-up's models in.
examples: functions
	@mkdir -p examples/photo-crops/glue && cp $(WASM_DIR)/crop.wasm examples/photo-crops/glue/
	@mkdir -p examples/sign-reader/glue examples/sign-reader/models
	@cp $(WASM_DIR)/ocr_detect.wasm $(WASM_DIR)/ocr_recognize.wasm $(WASM_DIR)/tts_frame.wasm examples/sign-reader/glue/
	@cd .jig/models && cp -u ppocr-det.onnx ppocr-det-640.onnx ppocr-det-480.onnx ppocr-det-int8.onnx ppocr-rec.onnx ppocr-rec-int8.onnx ppocr-rec.charset.txt \
		piper-joe.onnx piper-joe-int8.onnx piper-joe.phonemes.json cmudict.txt ../../examples/sign-reader/models/

# The paper's applications on synthetic models (`jig-synth`: about 7 GB in all), generated once into
# .jig/synth and linked into the bundles.
PAPER_APPS := social-media traffic-analysis ar-assistant
paper-apps: functions
	$(CARGO) run --release -p jig-synth -- .jig/synth
	@for app in $(PAPER_APPS); do \
		mkdir -p examples/$$app/glue examples/$$app/models; \
		for glue in $$(sed -n 's|^glue = "glue/\(.*\)"|\1|p' examples/$$app/jig.toml | sort -u); do \
			cp $(WASM_DIR)/$$glue examples/$$app/glue/; done; \
		for model in $$(sed -n 's|^model = "models/\(.*\)"|\1|p' examples/$$app/jig.toml); do \
			ln -f .jig/synth/$$model examples/$$app/models/$$model; done; \
	done

# One build serves the demo and the tests: the workspace in the dev profile with its tests, exactly what
# `cargo test --workspace` builds (a plain `cargo build -p jig` would resolve dependency features differently and
# leave most of it to rebuild), so `make test` after `make demo` compiles nothing. `jig` is target/debug/jig.
build: functions
	$(CARGO) test --workspace --no-run

# The fully optimised `jig` (target/release/jig), for benchmarks, reproductions and production.
release: functions
	$(CARGO) build --release -p jig

demo: build examples
	@scripts/demo.sh

# A cluster on this machine: etcd, three `jig node`s and two gateways on loopback; a node and the leading gateway
# are killed and the sign reader is still served (scripts/cluster_demo.sh).
cluster-demo: build examples
	@scripts/cluster_demo.sh

# The end-to-end tests (cli/tests/e2e) run the `jig` binary as a user does; cargo builds it for them, as they
# are the `jig` package's integration tests.
test: build check-manifests
	$(CARGO) test --workspace

# What the code is held to besides the tests (CI runs it after them): formatting, clippy and the workspace's lints
# without a warning, the libraries' docs without a broken link, and the fuzz targets (their own workspace) compiling.
lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --lib
	cd fuzz && $(CARGO) check --locked --target-dir ../target/fuzz-check

# The Kubernetes manifests in deploy/kubernetes and the Helm chart in deploy/helm/jig, against Kubernetes' JSON
# schemas and each other, offline (deploy/README.md).
check-manifests:
	@scripts/check_manifests.sh

# GPU serving end to end (not part of `make test`): needs an NVIDIA GPU and ONNX Runtime's CUDA build; see
# scripts/test_gpu.sh. With JIG=path/to/jig (a prebuilt binary, the glue and models staged as the script says)
# it builds nothing, for a machine without cargo.
test-gpu: $(if $(JIG),,release examples)
	@scripts/test_gpu.sh

# The gateway benchmark compares with `wasmtime serve` from crates.io (a long build, once).
WASMTIME := .jig/tools/bin/wasmtime
$(WASMTIME):
	$(CARGO) install --locked wasmtime-cli@48.0.8 --root .jig/tools

bench: release $(WASMTIME)
	$(CARGO) bench -p jig-runtime --bench runtime
	$(CARGO) bench -p jig --bench gateway
	$(CARGO) bench -p jig-model-host --bench model
	$(CARGO) bench -p jig --bench tensor_path

# The book: docs/src built into docs/book by mdbook (from crates.io, pinned, into .jig/tools once; without its
# `serve` and `watch` features), then every relative link and anchor of the book, README.md, BENCHMARKS.md and
# EVALUATION.md checked (scripts/check_links.py, which needs only python3).
MDBOOK := .jig/tools/bin/mdbook
$(MDBOOK):
	$(CARGO) install --locked mdbook@0.4.40 --no-default-features --features search --root .jig/tools

docs: $(MDBOOK)
	$(MDBOOK) build docs
	python3 scripts/check_links.py

# Ten minutes at twice the sign reader's served capacity (not part of `make test`): bounded memory, memory and
# file descriptors back after the load, goodput, the next request served (scripts/soak.sh).
soak: release examples
	@scripts/soak.sh

# Coverage-guided fuzzing of the parsers (not part of `make test`): AFL++ through afl.rs, FUZZ_SECONDS per target.
fuzz: setup
	@scripts/fuzz.sh

clean:
	$(CARGO) clean
