//! `#[tools]` on an impl block: a tool set sharing one value.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cairn_core::{
    ApprovalMode, FunctionInvocationContext, Kwargs, SharedTool, ToolError, ToolOutput, ToolSet,
};
use cairn_macros::tools;
use serde_json::{Value, json};

/// A stand-in for a long-lived dependency (a database pool).
struct Db {
    rows: Mutex<Vec<String>>,
    calls: AtomicUsize,
}

#[tools]
impl Db {
    /// Not a tool: stays an ordinary associated function.
    fn new() -> Self {
        Db {
            rows: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
        }
    }

    /// Insert a row.
    ///
    /// Returns the new row count.
    #[tool]
    async fn insert(
        &self,
        /// The row's text.
        row: String,
        ctx: &FunctionInvocationContext,
    ) -> String {
        tokio::task::yield_now().await;
        self.calls.fetch_add(1, Ordering::SeqCst);
        let user = ctx.kwargs.get_str("user_id").unwrap_or("anonymous");
        let mut rows = self.rows.lock().unwrap();
        rows.push(format!("{user}:{row}"));
        rows.len().to_string()
    }

    /// Count the rows.
    #[tool(name = "count_rows", approval_mode = "always_require")]
    fn count(&self) -> usize {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.rows.lock().unwrap().len()
    }

    #[cairn_macros::tool(description = "Fail on purpose.")]
    fn fail(&self, #[default(7)] code: u32) -> Result<(), String> {
        Err(format!("failed with code {code}"))
    }
}

fn find(tools: &[SharedTool], name: &str) -> SharedTool {
    Arc::clone(tools.iter().find(|t| t.spec().name == name).unwrap())
}

async fn call(tool: &SharedTool, args: Value, kwargs: Kwargs) -> Result<ToolOutput, ToolError> {
    let mut ctx = FunctionInvocationContext::new(Arc::clone(tool), "call", args);
    ctx.kwargs = kwargs;
    tool.invoke(&ctx).await
}

#[test]
fn tool_set_specs() {
    let tools = Arc::new(Db::new()).tools();
    let names: Vec<_> = tools.iter().map(|t| t.spec().name.clone()).collect();
    assert_eq!(names, ["insert", "count_rows", "fail"]);

    let insert = find(&tools, "insert").spec().clone();
    assert_eq!(
        insert.description,
        "Insert a row.\n\nReturns the new row count."
    );
    assert_eq!(insert.approval_mode, ApprovalMode::NeverRequire);
    assert_eq!(
        insert.parameters["properties"]["row"]["description"],
        "The row's text."
    );
    assert_eq!(insert.parameters["required"], json!(["row"]));
    assert_eq!(insert.parameters["additionalProperties"], false);
    assert!(!insert.parameters.to_string().contains("ctx"));

    let count = find(&tools, "count_rows").spec().clone();
    assert_eq!(count.approval_mode, ApprovalMode::AlwaysRequire);
    assert_eq!(count.parameters["properties"], json!({}));

    let fail = find(&tools, "fail").spec().clone();
    assert_eq!(fail.description, "Fail on purpose.");
    assert_eq!(fail.parameters["properties"]["code"]["default"], 7);
}

#[tokio::test]
async fn tools_share_the_value() {
    let db = Arc::new(Db::new());
    let tools = Arc::clone(&db).tools();
    let insert = find(&tools, "insert");
    let count = find(&tools, "count_rows");

    let out = call(
        &insert,
        json!({"row": "a"}),
        Kwargs::from([("user_id", "u1")]),
    )
    .await
    .unwrap();
    assert_eq!(out.text_content(), "1");
    let out = call(&insert, json!({"row": "b"}), Kwargs::new())
        .await
        .unwrap();
    assert_eq!(out.text_content(), "2");
    let out = call(&count, json!({}), Kwargs::new()).await.unwrap();
    assert_eq!(out.text_content(), "2");

    // The state lives on the one value the caller still holds.
    assert_eq!(*db.rows.lock().unwrap(), ["u1:a", "anonymous:b"]);
    assert_eq!(db.calls.load(Ordering::SeqCst), 3);
    // The methods stay ordinary methods.
    assert_eq!(db.count(), 2);
    assert_eq!(
        db.insert(
            "c".into(),
            &FunctionInvocationContext::new(insert, "x", json!({}))
        )
        .await,
        "3"
    );
}

#[tokio::test]
async fn tool_set_errors() {
    let tools = Arc::new(Db::new()).tools();
    let insert = find(&tools, "insert");
    let err = call(&insert, json!({"row": 1}), Kwargs::new())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{err:?}");

    let fail = find(&tools, "fail");
    let err = call(&fail, json!({}), Kwargs::new()).await.unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m == "failed with code 7"),
        "{err:?}"
    );
    let err = call(&fail, json!({"code": 2}), Kwargs::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m == "failed with code 2"),
        "{err:?}"
    );
}
