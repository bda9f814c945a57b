//! The CLI tests' fake OpenAI-compatible server (`cairn_test_support::blocking::FakeOpenAI`) as
//! a program, for benchmarks and trying the CLI without a model: it answers the first request of a run with a `write_file` call of
//! `/hello.py`, and any request that carries a tool result with a final answer.
//!
//! ```text
//! cargo run -p cairn-cli --example fake_openai_server      # prints OPENAI_BASE_URL=…
//! OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 cairn run --yes -m openai:fake "make hello.py"
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_test_support::blocking::FakeOpenAI;

fn main() {
    let server = FakeOpenAI::hello_loop();
    println!("OPENAI_BASE_URL={}", server.base_url);
    loop {
        std::thread::park();
    }
}
