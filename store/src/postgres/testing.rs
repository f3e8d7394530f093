//! A database of a test's own on the PostgreSQL server `OMNI_PG_URL` names (a role that
//! may create databases; `eval "$(scripts/postgres.sh start)"` gives one): made for the
//! test and dropped after, so tests run in parallel. For omni's own tests (the store's
//! and the session manager's across processes) and for an application's. Test support:
//! a failure panics, with what failed.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use postgres::{Client, NoTls};

use super::PgStore;

/// A database of the test's own, dropped when this is.
#[derive(Debug)]
pub struct TestDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// A new database for `test` (letters, digits and `_`), or `None` after saying so on
    /// stderr when `OMNI_PG_URL` is not set; in CI (`CI=true`) a missing server panics,
    /// so that the tests cannot be skipped there.
    pub fn new(test: &str) -> Option<Self> {
        #[allow(clippy::disallowed_methods)] // a test's setting
        let Ok(admin_url) = std::env::var("OMNI_PG_URL") else {
            #[allow(clippy::disallowed_methods)]
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("OMNI_PG_URL is not set, and CI=true: the PostgreSQL tests must run (scripts/postgres.sh)");
            }
            eprintln!("skipped: OMNI_PG_URL is not set (eval \"$(scripts/postgres.sh start)\" sets it)");
            return None;
        };
        static COUNT: AtomicU64 = AtomicU64::new(0);
        #[allow(clippy::disallowed_methods)] // a unique name, not a measurement
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let name = format!("omni_test_{test}_{}_{n}_{nanos}", std::process::id());
        admin(&admin_url).batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let url = with_database(&admin_url, &name);
        Some(Self { admin_url, name, url })
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A store on the database, as node `node` with leases of `lease`.
    pub fn store(&self, node: &str, lease: Duration) -> PgStore {
        PgStore::connect(&self.url, node, lease).unwrap()
    }

    /// A plain connection to the database.
    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).unwrap()
    }

    /// Ends the connections to the database whose last query starts with `query` (every
    /// connection, with ""), as an administrator or a failover would, from a connection
    /// to another database; how many.
    pub fn kill_connections_running(&self, query: &str) -> i64 {
        let pattern = format!("{}%", query.replace('%', "\\%"));
        let killed = admin(&self.admin_url)
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE datname = $1 AND pid <> pg_backend_pid() AND query LIKE $2",
                &[&self.name, &pattern],
            )
            .unwrap();
        killed.get(0)
    }

    /// Ends every connection to the database; how many.
    pub fn kill_connections(&self) -> i64 {
        self.kill_connections_running("")
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.admin_url, NoTls) {
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

fn admin(url: &str) -> Client {
    Client::connect(url, NoTls).unwrap()
}

/// `url` with its database replaced by `name`: a `postgres://` URL's path, or a
/// `dbname=` pair added to a key-value string.
pub fn with_database(url: &str, name: &str) -> String {
    let Some(scheme) = url.find("://") else { return format!("{url} dbname={name}") };
    let rest = &url[scheme + 3..];
    let authority = rest.find(['/', '?']).unwrap_or(rest.len());
    let after = &rest[authority..];
    let query = after.find('?').map_or("", |q| &after[q..]);
    format!("{}{}/{name}{query}", &url[..scheme + 3], &rest[..authority])
}

/// The password in a `postgres://user:password@` URL.
pub fn password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let userinfo = &rest[..rest.find('@')?];
    Some(userinfo.split_once(':')?.1.to_owned()).filter(|p| !p.is_empty())
}
