//! Refs and `return.select` over real result shapes.

use serde_json::{Value, json};

use super::decode::{MAX_WAIT_MS, decode};
use super::refs::{RefPath, resolve};
use super::*;

fn results() -> Vec<Option<Value>> {
    vec![
        Some(json!({"ok": true, "matches": [{"ref": 12, "name": "OK"}], "stdout": "rm\n"})),
        None,
        Some(json!({"ok": true,
            "matches": "[12] button \"Say \\\"hi\\\"\" (focused) in window \"Main\"\n[15] checkBox\n",
            "one": "[7] link \"Next\"\n"})),
        Some(json!({"ok": true, "matches": "[{\"ref\":40,\"role\":\"button\",\"name\":\"OK\"}]"})),
    ]
}

#[test]
fn refs_read_into_find_matches_in_either_format() {
    let read = |text: &str| RefPath::parse(text).unwrap().lookup(&results());
    assert_eq!(read("$3.matches[0].ref").unwrap(), json!(12));
    assert_eq!(read("$3.matches[0].name").unwrap(), json!("Say \"hi\""));
    assert_eq!(read("$3.matches[0].role").unwrap(), json!("button"));
    assert_eq!(read("$3.matches[1].ref").unwrap(), json!(15));
    assert_eq!(read("$3.matches[1].name").unwrap(), json!(""));
    assert_eq!(read("$3.one[0].ref").unwrap(), json!(7));
    assert_eq!(read("$3.one[0].name").unwrap(), json!("Next"));
    assert_eq!(read("$3.one[0]").unwrap(), json!("[7] link \"Next\""));
    assert_eq!(read("$4.matches[0].ref").unwrap(), json!(40));
    let past = read("$3.matches[2]").unwrap_err();
    assert!(
        past.contains("has 2 items, so [2] is past its end"),
        "{past}"
    );
    // A plain line is a string still.
    let plain = read("$1.stdout.x").unwrap_err();
    assert!(plain.contains("is a string"), "{plain}");
}

#[test]
fn refs_parse_and_read_nested_values() {
    let path = RefPath::parse("$1.matches[0].ref").unwrap();
    assert_eq!(path.step, 1);
    assert_eq!(path.lookup(&results()).unwrap(), json!(12));
    assert_eq!(
        RefPath::parse("$1.stdout")
            .unwrap()
            .lookup(&results())
            .unwrap(),
        json!("rm\n")
    );
}

#[test]
fn bad_refs_say_what_is_there() {
    let check = |text: &str, expect: &str| {
        let why = RefPath::parse(text)
            .and_then(|p| p.lookup(&results()))
            .unwrap_err();
        assert!(why.contains(expect), "{text}: {why}");
    };
    check(
        "$1.match",
        "has no field `match`; it has: matches, ok, stdout",
    );
    check(
        "$1.matches[3]",
        "`$1.matches` has 1 item, so [3] is past its end",
    );
    check(
        "$1.stdout.x",
        "`$1.stdout` is a string, which has no field `x`",
    );
    check("$2.stdout", "step 2 has no result");
    check("1.stdout", "does not start with `$`");
    check("$x", "no step number");
    check("$1.a[", "without its `]`");
    check("$1..a", "empty field name");
}

#[test]
fn resolving_replaces_refs_anywhere_and_names_the_path_of_a_bad_one() {
    let args =
        json!({"argv": ["echo", {"ref": "$1.matches[0].name"}], "n": {"ref": "$1.matches[0].ref"}});
    let resolved = resolve(&args, "steps[1].args", &results()).unwrap();
    assert_eq!(resolved, json!({"argv": ["echo", "OK"], "n": 12}));
    // An ax ref written as a plain value is not a step ref.
    let ax = json!({"ref": 12});
    assert_eq!(resolve(&ax, "a", &results()).unwrap(), ax);
    let err = resolve(
        &json!({"argv": [{"ref": "$1.nope"}]}),
        "steps[1].args",
        &results(),
    )
    .unwrap_err();
    assert_eq!(err.path.as_deref(), Some("steps[1].args.argv[0]"));
}

#[test]
fn decode_refuses_mixed_nested_forward_and_oversized_calls() {
    let limits = StepLimits::default();
    let err = |value: Value| decode(&value, &limits, &|_| None).err().expect("refused");
    let mixed = err(json!({"steps": [], "surface": "shell"}));
    assert!(
        mixed.message.contains("either `steps` or `surface`"),
        "{mixed:?}"
    );
    assert_eq!(mixed.valid, ["steps", "surface"]);
    let nested = err(json!({"steps": [{"steps": []}]}));
    assert_eq!(nested.path.as_deref(), Some("steps[0].steps"));
    let forward = err(json!({"steps": [
        {"surface": "shell", "command": "run", "args": {"argv": [{"ref": "$2.stdout"}]}},
        {"wait": {"ms": 1}}]}));
    assert_eq!(forward.path.as_deref(), Some("steps[0].args.argv[0]"));
    assert!(
        forward.message.contains("does not run before it"),
        "{forward:?}"
    );
    let many = json!({"steps": vec![json!({"wait": {"ms": 1}}); 33]});
    assert!(err(many).message.contains("more than the 32"));
    let long = err(json!({"steps": [{"wait": {"ms": MAX_WAIT_MS + 1}}]}));
    assert_eq!(long.path.as_deref(), Some("steps[0].wait.ms"));
    let typo = err(json!({"steps": [{"surface": "shell", "command": "run", "argz": {}}]}));
    assert_eq!(typo.path.as_deref(), Some("steps[0].argz"), "{typo:?}");
    assert!(typo.valid.contains(&"wait".to_string()), "{typo:?}");
    let select = err(json!({"steps": [{"wait": {"ms": 1}}], "return": {"select": ["$2.x"]}}));
    assert_eq!(select.path.as_deref(), Some("return.select[0]"));
}
