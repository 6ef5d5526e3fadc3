//! Fuzzes the decoder of a run's tools channel (`computer_daemon::tools::decode_request`): any
//! line a run sends. A line is a request or an `invalid_call` error saying what was wrong; a
//! request names no field beyond `token`, `op` and `arguments` (`arguments` with `call` only),
//! and round-trips through its serialised form.
#![no_main]

use computer_ipc::ErrorCode;
use computer_ipc::tools::{ToolsOp, ToolsRequest};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|line: &[u8]| {
    match computer_daemon::tools::decode_request(line) {
        Ok(request) => {
            let value: Value = serde_json::from_slice(line).expect("a decoded request is JSON");
            let fields = value.as_object().expect("a decoded request is an object");
            for key in fields.keys() {
                assert!(
                    ["token", "op", "arguments"].contains(&key.as_str()),
                    "unknown field `{key}` let through"
                );
            }
            // `"arguments": null` reads as none.
            let has_arguments = fields.get("arguments").is_some_and(|a| !a.is_null());
            assert_eq!(
                matches!(request.op, ToolsOp::Call { .. }),
                has_arguments,
                "arguments go with call, and only with call"
            );
            let again = serde_json::to_vec(&request).unwrap();
            let decoded: ToolsRequest = computer_daemon::tools::decode_request(&again)
                .expect("a request's own form decodes");
            assert_eq!(decoded, request);
        }
        Err(error) => {
            assert_eq!(error.code, ErrorCode::InvalidCall);
            assert!(error.message.starts_with("not a tools request: "));
        }
    }
});
