//! Headless Chromium for the tests of the HTML reports (explore's and the
//! conformance matrix's): a page loaded as a browser lays it out, its DOM and
//! what the browser logged, or a screenshot. Each run has a profile of its
//! own: Chromiums of tests running at once otherwise share one.

use std::io;
use std::path::Path;
use std::process::Command;

/// A Chromium on this machine.
#[derive(Debug, Clone, Copy)]
pub struct Chromium {
    program: &'static str,
}

/// A page as Chromium rendered it.
#[derive(Debug)]
pub struct Rendered {
    /// The DOM after the page's scripts ran, as the browser serializes it
    /// (only `&`, `<` and `>` escaped in text).
    pub dom: String,
    /// What the browser logged: a `CONSOLE` line is a message of the page's.
    pub log: String,
}

impl Rendered {
    /// The page's own console messages (errors, warnings, logs).
    pub fn console_messages(&self) -> Vec<&str> {
        self.log.lines().filter(|l| l.contains("CONSOLE")).collect()
    }
}

impl Chromium {
    /// Debian's `chromium` (or `chromium-browser`); an error saying how to
    /// install it when there is none.
    pub fn find() -> io::Result<Chromium> {
        ["chromium", "chromium-browser"]
            .into_iter()
            .find(|name| {
                Command::new(name)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .map(|program| Chromium { program })
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "chromium is missing (apt-get install chromium; scripts/test.sh does)",
                )
            })
    }

    /// The page in file `page`, laid out in a window `width` px wide.
    pub fn render(&self, page: &Path, width: u32) -> io::Result<Rendered> {
        let out = self.run(
            (width, 900),
            [
                "--enable-logging=stderr".into(),
                "--v=0".into(),
                "--dump-dom".into(),
                url(page)?,
            ],
        )?;
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(io::Error::other(format!("chromium failed: {log}")));
        }
        Ok(Rendered {
            dom: String::from_utf8_lossy(&out.stdout).into_owned(),
            log,
        })
    }

    /// A `width` x `height` screenshot of the page in file `page`, as PNG to `png`.
    pub fn screenshot(
        &self,
        page: &Path,
        (width, height): (u32, u32),
        png: &Path,
    ) -> io::Result<()> {
        let out = self.run(
            (width, height),
            [format!("--screenshot={}", png.display()), url(page)?],
        )?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "chromium failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// Runs the browser headless in a window of that size with `args`, on a
    /// fresh profile, removed when it ends.
    fn run(
        &self,
        (width, height): (u32, u32),
        args: impl IntoIterator<Item = String>,
    ) -> io::Result<std::process::Output> {
        let profile = tempfile::Builder::new()
            .prefix("slowfs-chromium-")
            .tempdir()?;
        Command::new(self.program)
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            .arg(format!("--window-size={width},{height}"))
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(args)
            .output()
    }
}

/// `file://` and the absolute path of `page`.
fn url(page: &Path) -> io::Result<String> {
    Ok(format!("file://{}", page.canonicalize()?.display()))
}
