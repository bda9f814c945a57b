//! CPU per model call against a running fake server: `FAKE_LLM_URL=http://127.0.0.1:PORT/v1`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use cairn_core::{
    ChatClient, ChatOptions, Content, FunctionCall, FunctionResult, Kwargs, Message, Role, ToolSpec,
};
use cairn_providers::{Api, OpenAIClient};
use futures::StreamExt;
use serde_json::json;

fn cpu() -> f64 {
    let mut total = 0u64;
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let p = t.unwrap().path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(p) {
            total += s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        }
    }
    total as f64 / 1e9
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = std::env::var("FAKE_LLM_URL").unwrap();
        let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
        let mut msgs = vec![Message::user("[scenario:loop steps=20] go")];
        for i in 0..5 {
            msgs.push(Message::new(Role::Assistant, vec![Content::FunctionCall(FunctionCall::new(format!("call_{i}_0"), "echo", &json!({"text":"hi"})))]));
            msgs.push(Message::tool_result(FunctionResult{call_id: format!("call_{i}_0"), output: vec![Content::text("hi")], is_error: false}));
        }
        let o = ChatOptions { tools: vec![ToolSpec::new("echo", "Echo.", json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}))], ..Default::default() };
        let (fk, ck) = (Kwargs::new(), Kwargs::new());
        let only_plain_chat = std::env::var("ONLY").is_ok();
        for api in [Api::ChatCompletions, Api::Responses] {
            if only_plain_chat && api == Api::Responses { continue; }
            let mut b = OpenAIClient::builder().base_url(&url).model("fake-model").api(api);
            if std::env::var("PLAIN_HTTP").is_ok() {
                let _ = rustls::crypto::ring::default_provider().install_default();
                b = b.http_client(reqwest::Client::builder().build().unwrap());
            }
            let c = b.build().unwrap();
            for stream in [false, true] {
                if only_plain_chat && stream { continue; }
                for _ in 0..50 { let _ = c.get_response(&msgs, &o, &fk, &ck).await.unwrap(); }
                let t0 = cpu();
                let w0 = std::time::Instant::now();
                for _ in 0..n {
                    if stream {
                        let mut s = c.get_streaming_response(&msgs, &o, &fk, &ck);
                        while let Some(u) = s.next().await { u.unwrap(); }
                    } else {
                        let r = c.get_response(&msgs, &o, &fk, &ck).await.unwrap();
                        assert!(r.function_calls().count() == 1);
                    }
                }
                let dt = cpu() - t0;
                println!("{api:?} stream={stream}: {:.4} ms CPU/call, {:.3} ms wall/call", dt * 1000.0 / n as f64, w0.elapsed().as_secs_f64()*1000.0/n as f64);
            }
        }
    });
}
