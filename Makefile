# The two README commands. Each sets up the machine (Debian packages), builds and runs.
JOBS ?= $(shell nproc)
# ccache (CMakeLists.txt uses it when installed): paths relative to the checkout, so every clone
# of these sources shares the cache; no working directory in the hash (the sanitizer presets' -g1).
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
PRESET ?= default
BUILD := build/$(PRESET)

.PHONY: setup configure build run test test-torch2 test-asan test-tsan clean
setup:
	bash scripts/setup.sh

# CMAKE_ARGS: extra cache settings, e.g. CMAKE_ARGS=-DGRADSYNC_WERROR=ON (what CI uses).
CMAKE_ARGS ?=
configure: setup
	cmake --preset $(PRESET) $(CMAKE_ARGS) >/dev/null

# TARGET: build only that target (default: everything).
TARGET ?=
build: configure
	cmake --build $(BUILD) -j $(JOBS) $(if $(TARGET),--target $(TARGET))

# The main job: the reference trainer on its embedded default (builds only what it needs).
run: configure
	cmake --build $(BUILD) -j $(JOBS) --target gradsync-train
	$(BUILD)/trainer/gradsync-train

# --timeout: a test without its own TIMEOUT that hangs fails after 10 minutes instead of holding
# the run (the slowest test takes under a minute, under the sanitizers too).
CTEST_ARGS ?=
test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(JOBS) $(CTEST_ARGS)

# PyTorch 2.x from the Python registry, as its users have it: a venv kept under ~/.cache (made once;
# pip keeps its own cache of the wheels), this checkout pip-installed into it, tests/torch on 1, 2
# and 3 ranks against that torch's DDP (scripts/test_torch.sh runs it for any interpreter).
TORCH2 ?= 2.15.0
TORCH2_VENV ?= $(HOME)/.cache/gradsync/venv-torch-$(TORCH2)
test-torch2: setup
	bash scripts/test_torch.sh --venv $(TORCH2_VENV) $(TORCH2)

# Sanitizer runs (CI runs both): the library's tests under ASan+UBSan, the threaded ones under TSan.
# Their presets build with -g1 (line tables, enough for the sanitizers' stack traces): full -g made
# each test file take 1.5x as long to compile (78 s against 51 s for test_misuse.cpp). ASan's builds at
# -O0: at -O1 test_collectives.cpp took 50.7 s to compile against 29.5 s, for tests that run for
# about two minutes in all; TSan keeps -O1 (its slowdown on unoptimized code is the larger).
test-asan:
	$(MAKE) test PRESET=asan CTEST_ARGS='-LE "package|compile_fail|slow"'

test-tsan:
	$(MAKE) test PRESET=tsan TARGET=tests_tsan CTEST_ARGS='-L tsan'

clean:
	rm -rf build
