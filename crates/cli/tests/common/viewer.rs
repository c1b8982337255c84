//! `tack view` from the outside: the binary started on a traces directory,
//! and a plain HTTP/1.1 client (what a browser sends, nothing more) to read
//! its pages.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `tack view`, stopped when dropped.
pub struct Viewer {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The address printed, with its token.
    pub url: String,
}

impl Viewer {
    pub fn start(traces: &Path, refresh_secs: u32) -> Viewer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tack"))
            .arg("view")
            .arg(traces)
            .args(["--json", "--refresh", &refresh_secs.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("tack view printed {line:?}: {e}"));
        assert_eq!(json["type"], "view_listening");
        let url = json["url"].as_str().unwrap().to_string();
        let base = url.split("/?token=").next().unwrap().to_string();
        Viewer { child, base, url }
    }

    /// The cookie the viewer sets for its token.
    pub fn cookie(&self) -> String {
        let token = self.url.split("token=").nth(1).unwrap();
        let answer = get(&self.base, &format!("/?token={token}"), None);
        assert_eq!(answer.status, 303, "{}", answer.body);
        let set = answer.header("set-cookie").unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        // Named for the port: a browser sends it to every port of the host.
        let port = self.base.rsplit(':').next().unwrap();
        assert!(
            set.starts_with(&format!("tack_view_token_{port}=")),
            "{set}"
        );
        set.split(';').next().unwrap().to_string()
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One answer: status, headers (names lowercased), body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// `GET base+path` with `cookie`, read to the end.
pub fn get(base: &str, path: &str, cookie: Option<&str>) -> Answer {
    let cookie = cookie
        .map(|c| format!("Cookie: {c}\r\n"))
        .unwrap_or_default();
    request("GET", base, path, &cookie, None)
}

/// One HTTP/1.1 request (`extra` headers, each ending in CRLF, and a JSON
/// body), answered in full: the connection is closed after it.
pub fn request(
    method: &str,
    base: &str,
    path: &str,
    extra: &str,
    json: Option<&serde_json::Value>,
) -> Answer {
    let host = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).unwrap();
    let body = json.map(|j| j.to_string()).unwrap_or_default();
    let typed = if json.is_some() {
        "Content-Type: application/json\r\n"
    } else {
        ""
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}{typed}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read up to the body; then as much as the answer says it holds (a
    // WebDriver server keeps the connection open whatever was asked).
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v): &(String, String)| v.clone())
    };
    let mut raw = Vec::new();
    if let Some(length) = header("content-length") {
        raw.resize(length.parse().unwrap(), 0);
        reader.read_exact(&mut raw).unwrap();
    } else {
        reader.read_to_end(&mut raw).unwrap();
    }
    let raw = String::from_utf8(raw).unwrap();
    let chunked = header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
    let body = if chunked { dechunk(&raw) } else { raw };
    Answer {
        status,
        headers,
        body,
    }
}

/// A chunked body's data.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    body
}

/// An `href` as written in a page (HTML-escaped), as a path to request.
pub fn unescape_href(href: &str) -> String {
    href.replace("&#x2f;", "/")
        .replace("&amp;", "&")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
}

/// Every `href="…"` in `html` whose value starts with `prefix`, unescaped.
pub fn links(html: &str, prefix: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(unescape_href)
        .filter(|href| href.starts_with(prefix))
        .collect()
}

/// The demo suite, two sim variants that differ, two trials of three tasks.
pub fn demo_run(dir: &Path) -> serde_json::Value {
    let demo = super::repo().join("suites/demo");
    super::run_suite(
        &demo,
        dir,
        &[
            "-v",
            "sim-full,sim-stdout",
            "-t",
            "cart-empty-total,duration-minutes,slugify-dashes",
            "--trials",
            "2",
        ],
        &[],
    )
}

/// Markup an agent or a task could write: in the instruction, a file name,
/// a check's name and output, and the agent's tool calls and their output.
pub const HOSTILE: [&str; 3] = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "javascript:alert(3)",
];

/// A suite whose one task is full of [`HOSTILE`] text: an oracle variant
/// runs its solution (which prints it) and a sim variant misses, so the
/// task flips between them.
pub fn hostile_suite(root: &Path) -> PathBuf {
    let suite = root.join("hostile");
    let task = suite.join("tasks/x-task");
    std::fs::create_dir_all(task.join("fixture")).unwrap();
    std::fs::create_dir_all(task.join("checks")).unwrap();
    std::fs::write(
        suite.join("suite.toml"),
        "[suite]\nname = \"hostile\"\ntrials = 1\n\n\
         [[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n[variants.harness]\nsandbox = \"off\"\n\n\
         [[variants]]\nname = \"sim\"\nmodel = \"sim\"\n[variants.harness]\nsandbox = \"off\"\n\
         [variants.sim]\nskill = 0.0\nmalformed_rate = 0.0\nmax_attempts = 1\n",
    )
    .unwrap();
    let all = HOSTILE.join(" ");
    std::fs::write(task.join("fixture/value.txt"), "bug\n").unwrap();
    std::fs::write(task.join("fixture/<img src=x onerror=alert(4)>.txt"), &all).unwrap();
    std::fs::write(
        task.join("checks/check.sh"),
        format!("echo '{all}'\ngrep -q fixed value.txt\n"),
    )
    .unwrap();
    let toml = format!(
        "instruction = '''Fix value.txt. {all}'''\n\n\
         [[checks]]\nname = '''{all}'''\nrun = 'bash \"$TACK_CHECKS/check.sh\"'\n\n\
         [solution]\nscript = '''echo '{all}'; cat *.txt'''\n\n\
         [[solution.edits]]\npath = \"value.txt\"\nold = \"bug\"\nnew = \"fixed\"\n\n\
         [[solution.decoys]]\npath = \"value.txt\"\nold = \"bug\"\nnew = \"fxied\"\n"
    );
    std::fs::write(task.join("task.toml"), toml).unwrap();
    suite
}
