//! The admin HTTP API, and the store under a host killed mid-burst.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

const ADMIN_TOKEN: &str = "admin-token-for-tests-0123456789abcdef";

async fn admin(
    host: &HttpHost,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let base = host.admin.as_ref().expect("--admin was given");
    let mut request = http_client().request(method, format!("{base}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_admin_api_needs_its_token_and_manages_tasks_and_approvals() {
    let m = manifest(vec![PluginEntry::notes()]);
    let host = http_env(
        &m,
        &["--admin", "127.0.0.1:0"],
        &[("TOOLHOST_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;

    let (status, body) = admin(&host, get.clone(), "/tasks", None, None).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "unauthorized");
    let (status, _) = admin(&host, get.clone(), "/tasks", Some("wrong-token"), None).await;
    assert_eq!(status, 401);
    // A task token is not an admin token.
    let task = open_task(&m, &["notes_note_save"], &[]);
    let (status, _) = admin(&host, get.clone(), "/tasks", Some(&task.token), None).await;
    assert_eq!(status, 401);

    let auth = Some(ADMIN_TOKEN);
    let (status, body) = admin(
        &host,
        post.clone(),
        "/tasks",
        auth,
        Some(json!({ "purpose": "x", "grants": ["notes_note_get"], "ttl": "5m" })),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("read tool")
    );

    let (status, opened) = admin(
        &host,
        post.clone(),
        "/tasks",
        auth,
        Some(json!({
            "purpose": "clean up old notes",
            "grants": ["notes_note_save", "notes_note_delete"],
            "ttl": "30m",
            "max_calls": 50
        })),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["task"]["id"].as_str().unwrap().to_string();
    let token = opened["token"].as_str().unwrap().to_string();
    assert_eq!(opened["task"]["opened_by"], "admin_api");
    assert_eq!(opened["task"]["max_calls"], 50);

    let (_, list) = admin(&host, get.clone(), "/tasks", auth, None).await;
    assert_eq!(list["tasks"].as_array().unwrap().len(), 2);
    let (status, shown) = admin(&host, get.clone(), &format!("/tasks/{id}"), auth, None).await;
    assert_eq!((status, shown["state"].as_str()), (200, Some("open")));
    let (status, _) = admin(&host, get.clone(), "/tasks/task-nope", auth, None).await;
    assert_eq!(status, 404);
    let (status, body) = admin(&host, reqwest::Method::DELETE, "/tasks", auth, None).await;
    assert_eq!(status, 405);
    assert!(body["error"]["message"].is_string(), "{body}");

    // A destructive call held for the operator, approved through the API.
    let client = connect_with(&host.url, Some(&token), ()).await.unwrap();
    let slug = json!({ "slug": "old" });
    ok(
        &client,
        "notes_note_save",
        json!({ "slug": "old", "title": "Old", "body": "", "tags": [] }),
    )
    .await;
    let error = refused(&client, "notes_note_delete", slug.clone()).await;
    let approval = error["approval_id"].as_str().unwrap().to_string();
    let (_, pending) = admin(&host, get.clone(), "/approvals", auth, None).await;
    assert_eq!(pending["approvals"][0]["id"], approval.as_str());
    assert_eq!(pending["approvals"][0]["arguments"], slug);
    let (status, decided) = admin(
        &host,
        post.clone(),
        &format!("/approvals/{approval}/approve"),
        auth,
        Some(json!({ "by": "alice" })),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["decided_by"], "admin_api:alice");
    let (status, _) = admin(
        &host,
        post.clone(),
        &format!("/approvals/{approval}/deny"),
        auth,
        None,
    )
    .await;
    assert_eq!(status, 409, "a decided approval stays decided");
    ok(&client, "notes_note_delete", slug).await;

    let (status, revoked) = admin(
        &host,
        post.clone(),
        &format!("/tasks/{id}/revoke"),
        auth,
        None,
    )
    .await;
    assert_eq!((status, revoked["state"].as_str()), (200, Some("revoked")));
    let error = refused(
        &client,
        "notes_note_save",
        json!({ "slug": "new", "title": "New", "body": "", "tags": [] }),
    )
    .await;
    assert_eq!(error["code"], "grant_expired");
    client.cancel().await.unwrap();
}

/// The admin listener holds its clients to the same deadlines as `/mcp`:
/// headers, then a body, that never end are cut off after the read timeout.
#[tokio::test]
async fn the_admin_listener_cuts_off_slow_clients() {
    let m = manifest(vec![PluginEntry::notes()]);
    let host = http_env(
        &m,
        &["--admin", "127.0.0.1:0", "--read-timeout", "500ms"],
        &[("TOOLHOST_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let base = host.admin.as_ref().expect("--admin was given");
    let cut = stall(
        base,
        b"GET /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
    )
    .await;
    assert!(cut.is_empty() || cut.contains(" 408 "), "{cut:?}");
    let slow_body = stall(
        base,
        format!(
            "POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"purpose\""
        )
        .as_bytes(),
    )
    .await;
    assert!(slow_body.starts_with("HTTP/1.1 408"), "{slow_body:?}");
    assert!(slow_body.contains("request_timeout"), "{slow_body:?}");
    // A body over 64 KiB is refused as such.
    let big = json!({ "purpose": "x".repeat(100_000) });
    let post = reqwest::Method::POST;
    let (status, body) = admin(&host, post, "/tasks", Some(ADMIN_TOKEN), Some(big)).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "too_large", "{body}");
    // Others are answered all along.
    let (status, _) = admin(
        &host,
        reqwest::Method::GET,
        "/tasks",
        Some(ADMIN_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
}

#[test]
fn the_admin_api_will_not_start_without_a_private_token() {
    let m = manifest(vec![PluginEntry::notes()]);
    let out = start_and_exit(&m, &["--admin", "0.0.0.0:0"]);
    assert!(!out.success);
    assert!(out.stderr.contains("loopback only"), "{}", out.stderr);
    let out = start_and_exit(&m, &["--admin", "127.0.0.1:0"]);
    assert!(!out.success);
    assert!(
        out.stderr.contains("TOOLHOST_ADMIN_TOKEN"),
        "{}",
        out.stderr
    );

    let file = m.path.parent().unwrap().join("admin-token");
    std::fs::write(&file, ADMIN_TOKEN).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = start_and_exit(
            &m,
            &[
                "--admin",
                "127.0.0.1:0",
                "--admin-token-file",
                file.to_str().unwrap(),
            ],
        );
        assert!(!out.success);
        assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_host_mid_burst_loses_no_acknowledged_write_and_leaves_a_sound_database() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &["notes_note_save"], &[]);
    for round in 0..3 {
        let mut host = http(&m, &[]);
        let client = connect_with(&host.url, Some(&task.token), ())
            .await
            .unwrap();
        let client = std::sync::Arc::new(client);
        // Writers save notes as fast as they can; a side thread opens tasks
        // through the CLI at the same time; then the host is killed.
        let writers: Vec<_> = (0..4)
            .map(|w| {
                tokio::spawn(save_until_it_fails(
                    client.clone(),
                    format!("r{round}-w{w}"),
                ))
            })
            .collect();
        let opener = {
            let path = m.path.clone();
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let _ = toolhost()
                        .args([
                            "task",
                            "open",
                            "--purpose",
                            "burst",
                            "--grant",
                            "notes_note_save",
                            "--ttl",
                            "1m",
                            "--manifest",
                        ])
                        .arg(&path)
                        .output();
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(700 + 300 * round)).await;
        host.child.kill().unwrap(); // SIGKILL
        host.child.wait().unwrap();
        let mut acknowledged = Vec::new();
        for writer in writers {
            acknowledged.extend(writer.await.unwrap());
        }
        opener.join().unwrap();
        assert!(
            !acknowledged.is_empty(),
            "round {round} wrote nothing before the kill"
        );

        let store = toolhost::store::SqliteStore::open(&m.path.parent().unwrap().join(".toolhost"))
            .expect("the database opens after a kill -9");
        assert_eq!(store.integrity_check().await.unwrap(), "ok");
        use toolhost::store::Store;
        for slug in &acknowledged {
            assert!(
                store
                    .state_get("notes", &format!("note/{slug}"))
                    .await
                    .unwrap()
                    .is_some(),
                "acknowledged note {slug} was lost"
            );
        }
    }
}
