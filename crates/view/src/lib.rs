//! `tack view`: one local web app over every run under the directories it
//! is given — the runs (a running one updating), every trial across them
//! filtered and searched, a trial's trajectory, any two variants compared
//! with a flipped task's trials side by side.
//!
//! Everything shown came from an agent or a task, so it is untrusted:
//! every value goes through the templates' HTML escaping, URLs are built
//! here with their parts percent-encoded, and every answer carries a
//! Content-Security-Policy that allows no script at all and styles only
//! from the viewer's own style sheet. The app only reads.
//!
//! Anyone who can reach the port could read the traces, so every request
//! needs the access token: the URL printed at start carries it once, and
//! the answer sets it as an HTTP-only, same-site cookie.

mod auth;
mod compare;
mod error;
mod pages;
mod params;
mod runs;
mod server;
mod state;
mod tasks;

pub use auth::access_token;
pub use error::ViewError;
pub use runs::{FoundRun, LiveVariant, RunLine, find, hidden_duplicates};
pub use server::serve;
pub use state::{Viewer, ViewerOptions};
