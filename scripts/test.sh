#!/usr/bin/env bash
# The project's test command (README: "Run the tests"). Installs the build dependencies of the
# embedded model if they are missing (cmake, clang, libclang; needs root or sudo), then builds
# everything and runs every test of the workspace: unit, integration, doc tests, the examples.
# Tests that need model weights skip with a notice unless the models were fetched with
# scripts/fetch-model.sh (CI fetches them and sets CAIRN_REQUIRE_MODELS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-build-deps.sh
cargo test --workspace --locked "$@"
