use super::*;

fn q(method: &str, params: Value) -> Question {
    Question {
        key: "k".into(),
        method: method.into(),
        params,
    }
}

const ALL: Answers = Answers {
    elicitation: true,
    url: true,
    sampling: true,
    roots: true,
    tasks: true,
};

#[test]
fn what_a_client_declared_is_what_it_is_asked() {
    let a = Answers::declared(&json!({"elicitation": {}, "sampling": {}}));
    assert!(a.elicitation && !a.url && a.sampling && !a.roots);
    let a = Answers::declared(&json!({"elicitation": {"url": {}}, "roots": {}}));
    assert!(!a.elicitation && a.url && !a.sampling && a.roots);
    assert!(!Answers::declared(&json!({"elicitation": true})).any());
    let form = Answers::declared(&json!({"elicitation": {"form": {}}}));
    assert!(form.takes(&q("elicitation/create", json!({"message": "?"}))));
    assert!(!form.takes(&q("elicitation/create", json!({"mode": "url"}))));
    assert!(!form.takes(&q("sampling/createMessage", json!({}))));
    assert!(!form.takes(&q("tools/list", json!({}))));
}

async fn asked(stream: &mut mpsc::Receiver<Vec<u8>>) -> Value {
    let request = stream.recv().await.unwrap_or_default();
    serde_json::from_slice(&request).unwrap_or_default()
}

#[tokio::test]
async fn only_the_caller_asked_can_answer_and_the_answer_is_reshaped() {
    let questions = Arc::new(Questions::default());
    let (tx, mut rx) = mpsc::channel(4);
    let asker = questions.asker("ada", ALL, tx);
    let call = asker.ask(
        "gh",
        vec![q(
            "sampling/createMessage",
            json!({"messages": [], "_meta": {"x": 1}}),
        )],
    );
    let call = tokio::spawn(call);
    let request = asked(&mut rx).await;
    assert_eq!(request["method"], "sampling/createMessage");
    assert!(request["params"].get("_meta").is_none());
    let id = request["id"].as_u64().unwrap_or_default();
    assert!(id < 1 << 53);
    let completion = json!({"role": "assistant", "content": {"type": "text", "text": "hi"},
                            "model": "m", "stopReason": "endTurn", "extra": "dropped"});
    assert!(
        !questions.answered("bob", id, Ok(completion.clone())),
        "not bob's question"
    );
    assert!(!questions.answered("ada", id + 1, Ok(completion.clone())));
    assert!(questions.answered("ada", id, Ok(completion)));
    let got = call.await.ok().flatten();
    assert_eq!(
        got,
        Some(Ok(vec![
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"},
                   "model": "m", "stopReason": "endTurn"})
        ]))
    );
    assert_eq!(questions.len(), 0);
    assert!(
        !questions.answered("ada", id, Ok(json!({}))),
        "answered once"
    );
}

#[tokio::test]
async fn a_refusal_declines_an_elicitation_and_fails_a_sampling() {
    let questions = Arc::new(Questions::default());
    let (tx, mut rx) = mpsc::channel(4);
    let mut some = ALL;
    some.url = false;
    let asker = questions.asker("", some, tx);
    let refuse = || RpcError {
        code: -1,
        message: "no\u{1b}[2J".into(),
        supported: Vec::new(),
        required: None,
    };
    let call =
        tokio::spawn(asker.ask("gh", vec![q("elicitation/create", json!({"message": "?"}))]));
    let request = asked(&mut rx).await;
    assert_eq!(request["params"]["message"], "[gh] ?");
    let id = request["id"].as_u64().unwrap_or_default();
    assert!(questions.answered("", id, Err(refuse())));
    assert_eq!(
        call.await.ok().flatten(),
        Some(Ok(vec![json!({"action": "decline"})]))
    );
    let call = tokio::spawn(asker.ask("gh", vec![q("sampling/createMessage", json!({}))]));
    let id = asked(&mut rx).await["id"].as_u64().unwrap_or_default();
    assert!(questions.answered("", id, Err(refuse())));
    match call.await.ok().flatten() {
        Some(Err(Refusal::Failed(e))) => {
            assert!(e.contains("refused") && !e.contains('\u{1b}'), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let url = asker
        .ask("gh", vec![q("elicitation/create", json!({"mode": "url"}))])
        .await;
    assert_eq!(url, None, "url mode was not declared: the handler decides");
    drop(rx);
    let gone = asker
        .ask("gh", vec![q("sampling/createMessage", json!({}))])
        .await;
    assert!(matches!(gone, Some(Err(_))), "{gone:?}");
    assert_eq!(questions.len(), 0);
}

#[tokio::test]
async fn a_stateless_clients_questions_pause_the_call_until_its_answers_come() {
    let (tx, mut pauses) = mpsc::channel(1);
    let answers = Answers::declared(&json!({"elicitation": {}, "roots": {}}));
    let mut early = Map::new();
    early.insert("unasked".into(), json!({"action": "accept"}));
    let asker = Questions::pausing("ada", answers, tx, early);
    let asked = vec![
        Question {
            key: "name".into(),
            method: "elicitation/create".into(),
            params: json!({"message": "Who?", "requestedSchema": {}}),
        },
        Question {
            key: "where".into(),
            method: "roots/list".into(),
            params: json!({}),
        },
    ];
    let call = tokio::spawn(asker.ask("gh", asked));
    let pause = pauses.recv().await.unwrap_or_else(|| panic!("paused"));
    assert_eq!(
        pause.requests["name"]["params"]["message"], "[gh] Who?",
        "shown as any question is"
    );
    assert_eq!(pause.requests["where"]["method"], "roots/list");
    let mut given = Map::new();
    given.insert(
        "name".into(),
        json!({"action": "accept", "content": {"n": "a"}, "x": 1}),
    );
    given.insert(
        "where".into(),
        json!({"roots": [{"uri": "file:///w", "name": "w", "x": 2}, {"name": "no uri"}]}),
    );
    let _ = pause.resume.send(given);
    assert_eq!(
        call.await.ok().flatten(),
        Some(Ok(vec![
            json!({"action": "accept", "content": {"n": "a"}}),
            json!({"roots": [{"uri": "file:///w", "name": "w"}]}),
        ]))
    );
    let undeclared = asker
        .ask("gh", vec![q("sampling/createMessage", json!({}))])
        .await;
    assert_eq!(undeclared, Some(Err(Refusal::Undeclared("sampling"))));
}

#[tokio::test]
async fn answers_sent_with_the_call_are_used_without_pausing() {
    let (tx, mut pauses) = mpsc::channel(1);
    let mut early = Map::new();
    early.insert(
        "k".into(),
        json!({"action": "accept", "content": {"name": "Alice"}}),
    );
    early.insert("extra".into(), json!({"action": "accept"}));
    let answers = Answers::declared(&json!({"elicitation": {}}));
    let asker = Questions::pausing("", answers, tx, early);
    let got = asker
        .ask("gh", vec![q("elicitation/create", json!({"message": "?"}))])
        .await;
    assert_eq!(
        got,
        Some(Ok(vec![
            json!({"action": "accept", "content": {"name": "Alice"}})
        ]))
    );
    assert!(pauses.try_recv().is_err(), "nothing was asked");
    // Used once: the same question again pauses.
    let again = tokio::spawn(asker.ask("gh", vec![q("elicitation/create", json!({}))]));
    let pause = pauses.recv().await.unwrap_or_else(|| panic!("paused"));
    assert!(pause.requests.contains_key("k"));
    drop(pause);
    assert!(matches!(
        again.await.ok().flatten(),
        Some(Err(Refusal::Failed(_)))
    ));
}

#[test]
fn a_sampling_request_gets_no_other_servers_context() {
    let messages = json!([{"role": "user", "content": {"type": "text", "text": "hi"}}]);
    for asked in ["allServers", "thisServer", "none"] {
        let params = json!({"messages": messages, "maxTokens": 9, "includeContext": asked,
                            "_meta": {"x": 1}});
        let shown = shown_to_client("s", "sampling/createMessage", params);
        assert_eq!(shown["includeContext"], "none", "{asked}");
        assert!(shown.get("_meta").is_none());
        assert_eq!(shown["messages"], messages);
    }
    let plain = shown_to_client("s", "sampling/createMessage", json!({"maxTokens": 9}));
    assert!(
        plain.get("includeContext").is_none(),
        "not added where not asked"
    );
}
