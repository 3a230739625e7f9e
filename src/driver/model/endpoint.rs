//! The one URL builder for every request to a provider: the chat endpoint of each provider and
//! the model list, under a base URL that may carry a query (a gateway's `?key=`), credentials
//! (`user:token@`) or a fragment. The path goes before the query, never after it. Must not
//! touch: HTTP, redaction (that is [`super::client::redact_url`], applied to what this builds).

/// `base` cut at its query: the part before `?` (without a fragment) and the query, if any.
pub fn split_query(base: &str) -> (&str, Option<&str>) {
    let base = base.split('#').next().unwrap_or(base);
    match base.split_once('?') {
        Some((head, query)) => (head, Some(query).filter(|q| !q.is_empty())),
        None => (base, None),
    }
}

/// `path` under `base`, before the base's query (a gateway's `?key=` stays a query), with
/// `more` added to that query. A fragment of `base` is dropped (it is never sent).
pub fn join(base: &str, path: &str, more: Option<&str>) -> String {
    let (head, query) = split_query(base);
    let head = head.trim_end_matches('/');
    let query: Vec<&str> = query.into_iter().chain(more).collect();
    if query.is_empty() {
        format!("{head}{path}")
    } else {
        format!("{head}{path}?{}", query.join("&"))
    }
}

/// `path` on the server's root: `base` without its trailing `/v1` (its query kept), for the
/// servers' own routes (llama.cpp's `/props`, LM Studio's `/api/v0/models`).
pub fn on_root(base: &str, path: &str) -> String {
    let (head, query) = split_query(base);
    let head = head.trim_end_matches('/');
    let root = head.strip_suffix("/v1").unwrap_or(head);
    join(root, path, query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_goes_before_the_query_and_credentials_stay() {
        assert_eq!(
            join("http://h/v1/?key=k", "/models", None),
            "http://h/v1/models?key=k"
        );
        assert_eq!(
            join("http://h", "/v1/models", Some("limit=1000")),
            "http://h/v1/models?limit=1000"
        );
        assert_eq!(
            join(
                "https://u:t@h:8/v1?key=k&x=1#frag",
                "/chat/completions",
                None
            ),
            "https://u:t@h:8/v1/chat/completions?key=k&x=1"
        );
        assert_eq!(join("http://h/v1?", "/models", None), "http://h/v1/models");
        assert_eq!(
            on_root("http://u:t@h/v1/?key=k", "/props"),
            "http://u:t@h/props?key=k"
        );
        assert_eq!(on_root("http://h:1234", "/props"), "http://h:1234/props");
    }
}
