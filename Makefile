# The two README commands. Each sets up the machine (Debian packages), builds and runs.
JOBS ?= $(shell nproc)
PRESET ?= default
BUILD := build/$(PRESET)

.PHONY: setup configure build run test test-asan test-tsan package-test clean
setup:
	bash scripts/setup.sh

configure: setup
	cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the reference trainer on its embedded default when it is built, else the demo.
run: build
	@if [ -x $(BUILD)/trainer/gradsync-train ]; then $(BUILD)/trainer/gradsync-train; \
	 else $(BUILD)/examples/01_inprocess_training_loop; fi

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan:
	$(MAKE) test PRESET=asan

test-tsan:
	$(MAKE) test PRESET=tsan

clean:
	rm -rf build
