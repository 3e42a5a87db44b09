//! The MCP bridge with rmcp's own client, in process over an in-memory pipe.

use ferret::Ferret;
use ferret::config::{Config, Mode};
use ferret::mcp::{FerretServer, Shared};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use std::sync::Arc;

fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[tokio::test]
async fn rmcp_client_lists_and_calls_tools() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(t.path().join(".env"), "K=v\n").unwrap();
    let mut config = Config::defaults(Mode::Server);
    config.roots = vec![t.path().to_path_buf()];
    config.tools = [
        "read_file",
        "list_directory",
        "file_exists",
        "get_file_info",
        "grep",
        "glob",
        "search_files",
    ]
    .map(String::from)
    .to_vec();
    let shared = Shared::new(Arc::new(Ferret::new(config).unwrap()), false).unwrap();

    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = tokio::spawn(async move {
        let running = FerretServer::new(shared).serve(server_io).await.unwrap();
        running.waiting().await.unwrap();
    });
    let client = ().serve(client_io).await.unwrap();

    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("ferret")
    );
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "list_directory",
            "file_exists",
            "get_file_info",
            "grep",
            "glob",
            "search_files"
        ]
    );
    assert!(tools.iter().all(|t| t.output_schema.is_some()));

    let r = client
        .call_tool(
            CallToolRequestParams::new("grep")
                .with_arguments(args(json!({"pattern": "beta", "output_mode": "count"}))),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    assert_eq!(
        r.structured_content,
        Some(
            json!({"files": [{"path": "a.txt", "count": 1}], "file_count": 1, "match_count": 1, "truncated": false, "engine": "scan"})
        )
    );

    let r = client
        .call_tool(
            CallToolRequestParams::new("read_file").with_arguments(args(json!({"path": ".env"}))),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let text = serde_json::to_string(&r.content).unwrap();
    assert!(text.contains("DENIED_PATTERN"), "{text}");

    client.cancel().await.unwrap();
    server.await.unwrap();
}
