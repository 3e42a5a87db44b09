//! The integration tests, one binary (as ripgrep does): one build, one link, shared
//! helpers in `util`, a module per area.

mod adversarial;
mod changes;
mod cli;
mod crash;
mod faults;
mod index;
mod index_r3;
mod layers;
mod mcp_inprocess;
mod safety;
mod sandbox;
mod search;
mod security_doc;
mod shell;
mod util;
mod walker;
