# The two entry points: `make demo` and `make test`. Both install what is missing and build first.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's ob1 (what it picks on these machines anyway): MPI_Init then opens no component that calls
# setenv() beside the PMIx thread's getenv() (docs/launcher.md, "Open MPI 4.1 and MPI_Init").
export OMPI_MCA_pml ?= ob1

.PHONY: all deps build demo test unit clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null
	@cmake --build $(BUILD)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure --timeout 600 -j2

unit: build
	@cd $(BUILD) && ctest --output-on-failure -L unit

clean:
	rm -rf $(BUILD)
