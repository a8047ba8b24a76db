//! `ebb sql` at a terminal, driven in tmux as a person would: a statement
//! over two lines, Tab completing a table name, Up recalling the last
//! statement (not printing `^[[A`), `\d`, and history kept across sessions.
//! Needs tmux (installed by scripts/prereqs.sh); each wait is bounded.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::{Server, call, ebb_bin, wait_until};

/// One tmux session running `ebb sql` against `url`, with its own tmux
/// server socket so tests never share one.
struct Terminal {
    socket: String,
}

impl Terminal {
    fn start(url: &str, home: &std::path::Path, name: &str) -> Self {
        let socket = format!("ebb-test-{}-{name}", std::process::id());
        let command = format!(
            "env HOME={} TERM=xterm {} --url {url} sql",
            home.display(),
            ebb_bin()
        );
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "40",
                &command,
            ])
            .status()
            .expect("tmux runs (scripts/prereqs.sh installs it)");
        assert!(status.success());
        let terminal = Self { socket };
        let started = std::time::Instant::now();
        while !terminal.screen().contains("ebb>") {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no prompt; the screen: {}",
                terminal.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        terminal
    }

    /// Send keys (tmux key names, or literal text with `literal`).
    fn keys(&self, keys: &[&str], literal: bool) {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket, "send-keys", "-t", "0"]);
        if literal {
            command.arg("-l");
        }
        assert!(command.args(keys).status().unwrap().success());
    }

    fn type_text(&self, text: &str) {
        // A lone `;` separates tmux commands; `\;` is the character.
        let text = if text == ";" { "\\;" } else { text };
        self.keys(&[text], true);
    }

    fn screen(&self) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Wait until the last line on the screen is an empty prompt: the
    /// line editor is reading keys again. Keys sent before that can be
    /// lost: before it prints the prompt, rustyline asks the terminal for
    /// the cursor position and reads the answer from the same input, so a
    /// key arriving first is taken as a malformed answer and dropped.
    fn wait_for_prompt(&self) {
        let started = std::time::Instant::now();
        loop {
            let screen = self.screen();
            let last = screen.lines().rev().find(|line| !line.trim().is_empty());
            if last.map(str::trim_end) == Some("ebb>") {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no empty prompt on the screen: {screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until `ebb sql` has exited (its tmux session ends with it), so
    /// everything it saves on the way out is on disk.
    fn wait_for_exit(&self) {
        wait_until(Duration::from_secs(10), "ebb sql exits", || {
            !Command::new("tmux")
                .args(["-L", &self.socket, "has-session"])
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .success()
        });
    }

    fn wait_for(&self, what: &str) {
        let started = std::time::Instant::now();
        while !self.screen().contains(what) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no {what:?} on the screen: {}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

#[test]
fn the_prompt_edits_completes_recalls_and_remembers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    for key in ["a", "b"] {
        let put = call(
            "PUT",
            &format!("{}/v1/tables/customers/keys/{key}", server.url),
            &[],
            Some(b"v"),
        );
        assert_eq!(put.status, 200);
    }
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let terminal = Terminal::start(&server.url, &home, "one");
    // A statement over two lines; Tab completes `cust` to `customers`.
    terminal.type_text("SELECT count(*) AS n");
    terminal.keys(&["Enter"], false);
    terminal.type_text("FROM cust");
    terminal.keys(&["Tab"], false);
    terminal.wait_for("FROM customers");
    terminal.type_text(";");
    terminal.keys(&["Enter"], false);
    terminal.wait_for("(1 row");
    terminal.wait_for_prompt();
    let screen = terminal.screen();
    assert!(
        screen.contains("\nn\n") || screen.contains("n\n-"),
        "{screen}"
    );
    // Up recalls the statement instead of printing an escape sequence.
    terminal.keys(&["Up"], false);
    wait_until(Duration::from_secs(10), "the statement recalled", || {
        terminal.screen().matches("FROM customers;").count() == 2
    });
    assert!(!terminal.screen().contains("^[[A"));
    terminal.keys(&["C-c"], false);
    terminal.wait_for_prompt();
    terminal.type_text("\\d");
    terminal.keys(&["Enter"], false);
    terminal.wait_for("memory bytes");
    assert!(terminal.screen().contains("customers"));
    terminal.wait_for_prompt();
    terminal.type_text("\\q");
    terminal.keys(&["Enter"], false);
    terminal.wait_for_exit();
    drop(terminal);

    // A new session remembers the statements of the last one.
    let history = std::fs::read_to_string(home.join(".ebb_history")).unwrap();
    assert!(history.contains("FROM customers;"), "{history}");
    let terminal = Terminal::start(&server.url, &home, "two");
    terminal.keys(&["Up"], false);
    terminal.wait_for("ebb> \\q");
    terminal.keys(&["Up"], false);
    terminal.wait_for("ebb> \\d");
    drop(terminal);
    assert_eq!(server.stop(), 0);
}
