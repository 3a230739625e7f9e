//! An allowed host works for each protocol the proxy speaks, as real clients use them.

use super::{curl, http_server, mapped, runtime, serve};
use acp_bash::netproxy::Proxy;

#[test]
fn curl_reaches_a_mapped_host_by_plain_http_connect_and_socks5() {
    let server = http_server(None);
    let rt = runtime();
    let serving = serve(&Proxy::new(mapped(server.addr)), &rt);
    let proxy = serving.local_addr().to_string();

    // A plain-HTTP forward: the absolute URL becomes a path, the Host header stays.
    let (code, out) = curl(&[
        "-x",
        &format!("http://{proxy}"),
        "http://registry.test/a?b=1",
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "GET /a?b=1 HTTP/1.1|host: registry.test\n")
    );

    // CONNECT (what every https:// URL uses), here with plain HTTP inside the tunnel.
    let (code, out) = curl(&[
        "-p",
        "-x",
        &format!("http://{proxy}"),
        "http://registry.test:8080/c",
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "GET /c HTTP/1.1|host: registry.test:8080\n")
    );

    // SOCKS5 with the name resolved by the proxy (socks5h://, what ALL_PROXY says).
    let (code, out) = curl(&[
        "-x",
        &format!("socks5h://{proxy}"),
        "http://registry.test/s",
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "GET /s HTTP/1.1|host: registry.test\n")
    );
    assert_eq!(serving.take_blocks(), vec![]);
}

#[test]
fn git_pip_npm_and_cargo_reach_a_mapped_host_where_installed() {
    use std::process::Command;
    let server = http_server(None);
    let rt = runtime();
    let serving = serve(&Proxy::new(mapped(server.addr)), &rt);
    let proxy = format!("http://{}", serving.local_addr());
    let dir = tempfile::tempdir().unwrap();
    // Each tool fetches from registry.test through the proxy; the server answers anything
    // with its echo, which no tool accepts as data, so each fails *after* the request: the
    // proof is the request the server got, under the path only that tool asks for (a tool
    // that ignored the proxy would fail to resolve registry.test and never get there).
    let tools: [(&str, &str, Vec<&str>); 4] = [
        (
            "git",
            "/repo.git/info/refs",
            vec!["ls-remote", "http://registry.test/repo.git"],
        ),
        (
            "pip3",
            "/simple/nothing-here",
            vec![
                "download",
                "--no-deps",
                "--no-cache-dir",
                "--retries",
                "0",
                "--index-url",
                "http://registry.test/simple",
                "--trusted-host",
                "registry.test",
                "nothing-here",
            ],
        ),
        (
            "npm",
            "/nothing-here",
            vec![
                "view",
                "--registry",
                "http://registry.test/",
                "nothing-here",
            ],
        ),
        (
            "cargo",
            "/index/config.json",
            vec![
                "search",
                "--index",
                "sparse+http://registry.test/index/",
                "x",
            ],
        ),
    ];
    for (tool, path, args) in tools {
        if super::which_tool(tool).is_none() {
            crate::support::skip_unless(tool, Err(format!("{tool} is not installed")));
            continue;
        }
        let out = Command::new(tool)
            .args(&args)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .env("CARGO_HOME", dir.path().join("cargo"))
            .env("npm_config_cache", dir.path().join("npm"))
            .env("http_proxy", &proxy)
            .env("HTTP_PROXY", &proxy)
            .env("https_proxy", &proxy)
            .env("HTTPS_PROXY", &proxy)
            .env("npm_config_proxy", &proxy)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("PIP_NO_INPUT", "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let seen = server.seen();
        assert!(
            seen.iter().any(|line| line.split(' ').nth(1).is_some_and(|p| p.starts_with(path))),
            "{tool} did not reach registry.test{path} through the proxy (server saw {seen:?}):\n{text}"
        );
        assert_eq!(serving.take_blocks(), vec![], "{tool}:\n{text}");
    }
}
