//! The integration tests, one binary (as ripgrep does): one build, one link, shared
//! helpers in `util`, a module per area.

mod adversarial;
mod changes;
mod changes_r4;
mod cli;
mod cli_rg;
mod config_r4;
mod cost_r3;
mod cost_r4;
mod crash;
mod everyday_a;
mod everyday_b;
mod faults;
mod http_r3;
mod index;
mod index_r3;
mod layers;
mod mcp_inprocess;
mod mcp_r4;
mod names_r3;
mod names_r4;
mod platform;
mod safety;
mod sandbox;
mod search;
mod security_doc;
mod shell;
mod state_r4;
mod undo_r3;
mod undo_r4;
mod util;
mod walker;
mod wide_r4;
