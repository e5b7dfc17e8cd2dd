//! A throwaway PostgreSQL cluster for the tests (and `host/benches/team_gateway.rs`,
//! which includes this file): Debian's server binaries, a data directory in a temporary
//! directory, on a free loopback port, trust authentication. As root it runs as the
//! `postgres` user (PostgreSQL refuses root). Stopped (fast) and removed when dropped;
//! `stop` and `start_again` let a test take it away mid-load.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    owner: Option<(u32, u32)>,
    child: Option<Child>,
    /// Server settings given at each start (`-c name=value`).
    settings: Vec<String>,
}

/// The newest installed server's binaries (`/usr/lib/postgresql/<version>/bin`).
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server in /usr/lib/postgresql: install Debian's `postgresql` package (.ci/test does)"
        )
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `cmd` (`what` names it in a failure) and its output, when it succeeded.
fn succeeded(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The `postgres` user's uid and gid, when this process is root.
fn owner() -> Option<(u32, u32)> {
    if uid() != 0 {
        return None;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .unwrap_or_else(|e| panic!("id: {e}"));
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| {
                panic!("as root the cluster runs as the `postgres` user, and there is none")
            })
    };
    Some((id("-u"), id("-g")))
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

impl Postgres {
    /// A new cluster, started and accepting connections.
    pub fn start() -> Postgres {
        let mut pg = Postgres::init();
        pg.start_again();
        pg
    }

    /// A new cluster that takes TLS connections: a CA and a certificate for 127.0.0.1
    /// made with `openssl`; the CA's PEM file, for clients to trust.
    pub fn start_tls() -> (Postgres, PathBuf) {
        let mut pg = Postgres::init();
        let dir = pg.dir.path().to_owned();
        let openssl = |args: &[&str]| {
            let mut cmd = Command::new("openssl");
            cmd.args(args).current_dir(&dir);
            succeeded(&mut cmd, "openssl (Debian's `openssl` package)");
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=edgar test CA",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        std::fs::write(
            dir.join("san.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ]);
        for f in ["server.key", "server.pem"] {
            let path = dir.join(f);
            if let Some((uid, gid)) = pg.owner {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        pg.settings = vec![
            "ssl=on".into(),
            format!("ssl_cert_file={}", dir.join("server.pem").display()),
            format!("ssl_key_file={}", dir.join("server.key").display()),
        ];
        pg.start_again();
        (pg, dir.join("ca.pem"))
    }

    fn init() -> Postgres {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let owner = owner();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let pg = Postgres {
            dir,
            bin: bin_dir(),
            port: free_port(),
            owner,
            child: None,
            settings: Vec::new(),
        };
        let mut initdb = pg.command("initdb");
        initdb
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(pg.data());
        succeeded(&mut initdb, "initdb");
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        cmd.current_dir(self.dir.path()).env("LC_ALL", "C.UTF-8");
        cmd
    }

    /// A URL for the `postgres` database as the `postgres` superuser, without TLS.
    pub fn url(&self) -> String {
        self.url_with("sslmode=disable")
    }

    /// The same with another query (`sslmode=require`).
    pub fn url_with(&self, query: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?{query}",
            self.port
        )
    }

    /// Starts the server (again) on the same port and data, waiting until it answers.
    pub fn start_again(&mut self) {
        let socket_dir: &Path = self.dir.path();
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(socket_dir)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "max_connections=200",
            ])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("postgres: {e}"));
        self.child = Some(child);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            let ready = self
                .command("pg_isready")
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("PostgreSQL did not accept connections within 30 s");
    }

    /// The first column of `sql`'s rows, one per line (psql, unaligned).
    pub fn query(&self, sql: &str) -> String {
        let mut psql = self.command("psql");
        psql.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
        ])
        .args(["-d", "postgres", "-At", "-c", sql]);
        let out = succeeded(&mut psql, sql);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Stops the server (fast shutdown: connections are cut) and waits for it to end.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}
