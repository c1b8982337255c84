# The README's two commands, as recipes.

# Build and run the demo suite offline; prints the report path.
demo:
    cargo run --bin tack -- run suites/demo

# The whole test suite (what CI runs).
test:
    cargo test --workspace

# Prove every demo task fails untouched and passes with its solution.
check-suite:
    cargo run --bin tack -- suite check suites/demo

# Formatting and lints, as required before a commit.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Benchmarks (release build): tack against Inspect AI, trace sizes, concurrency,
# sandbox overhead; writes docs/benchmarks.md.
bench *ARGS:
    bench/run --out docs/benchmarks.md {{ARGS}}
