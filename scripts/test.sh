#!/usr/bin/env bash
# The project's test command (README: "Run the tests"). Builds everything and runs every test of
# the workspace: unit, integration, doc tests and examples' builds.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked "$@"
