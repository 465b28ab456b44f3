//! What an API alone says, where both the leak model ([`crate::model`]) and the stream-ordering
//! model ([`crate::streams`]) ask it, from the meanings the API list declares
//! (`gpuleak_format::api`). Each model's own questions stay with it.

use gpuleak_format::{Api, Op};

/// Whether `api` launches an executable graph (its `Launch` record's `function`).
pub fn is_graph_launch(api: Api) -> bool {
    api.op() == Some(Op::GraphLaunch)
}

/// An event recorded over, or waited for by, a whole context (`cuCtxRecordEvent`,
/// `cuCtxWaitEvent`) or green context (`cuGreenCtxRecordEvent`, `cuGreenCtxWaitEvent`): the
/// record's `stream` field is the context. The stream-ordering model has one context, so a
/// record captures every stream's work so far and a wait orders every stream's later work
/// (more than the driver does when the process has several contexts or green contexts: it can
/// hide findings, never add one); a context's wait joins no stream to a capture.
pub fn context_wide(api: Api) -> bool {
    api.is_context_wide()
}
