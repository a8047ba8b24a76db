# ebb: two commands to remember.
#   make run   install what is missing, build, and run
#   make test  install what is missing and run every test
#
# Every target builds with the release profile so the heavy C++ dependencies
# (RocksDB) are compiled once and shared by run, test and bench.

CARGO ?= cargo
PROFILE := --release

.PHONY: run test bench build lint fmt prereqs clean-data

prereqs:
	@./scripts/prereqs.sh

build: prereqs
	$(CARGO) build $(PROFILE) --workspace

run: prereqs
	$(CARGO) run $(PROFILE) -p ebb-host --example embedded

test: prereqs
	$(CARGO) test $(PROFILE) --workspace --all-targets
	$(CARGO) test $(PROFILE) --workspace --doc

bench: prereqs
	$(CARGO) bench -p ebb-host --bench kv

lint: prereqs
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy $(PROFILE) --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean-data:
	rm -rf ebb-data
