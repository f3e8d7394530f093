//! The built-in data, parsed per provider on first need.
//!
//! Parsing every embedded file (and cloning the result) for each new client was over a
//! third of the instructions from process start to the first request, though a call
//! only ever needs one provider. So the files are indexed by the provider they define:
//! the first lookup of a provider parses its files alone, once per process, and every
//! catalogue from [`Catalogue::builtin`] reads the result by reference. Listing and
//! "did you mean" suggestions parse the rest (they are off the hot path).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::{Catalogue, CatalogueError, BUILTIN_FILES, BUILTIN_PROVIDERS};
use crate::data::model::Model;
use crate::data::provider::Provider;

/// One built-in provider and its models, as its files define them.
pub(super) struct BuiltinProvider {
    pub provider: Provider,
    /// Model id -> model.
    pub models: BTreeMap<String, Model>,
}

/// The parsed providers of one process. A slot per file, of which a provider uses the
/// one of its first file, so the index needs no second table.
pub(super) struct Store {
    slots: [OnceLock<Option<BuiltinProvider>>; BUILTIN_FILES.len()],
    /// How many embedded files this store has parsed, to show that a client parses only
    /// what it uses and nothing twice.
    #[cfg(test)]
    pub files_parsed: std::sync::atomic::AtomicUsize,
}

impl Store {
    pub(super) const fn new() -> Self {
        Self {
            slots: [const { OnceLock::new() }; BUILTIN_FILES.len()],
            #[cfg(test)]
            files_parsed: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The process-wide store (in unit tests, the calling thread's own one when a test
    /// installed it, so that tests running at once do not see each other's parsing).
    pub(super) fn global() -> &'static Self {
        static GLOBAL: Store = Store::new();
        #[cfg(test)]
        if let Some(store) = test_store::installed() {
            return store;
        }
        &GLOBAL
    }

    /// The built-in provider with this id and its models, parsed on first use. `None` for
    /// an id that is not built in, or whose files do not load (a unit test rules that out;
    /// the provider then reads as unknown rather than taking the process down).
    pub(super) fn get(&self, id: &str) -> Option<&BuiltinProvider> {
        self.slot(id)?.get_or_init(|| self.parse(id).ok()).as_ref()
    }

    /// The slot of provider `id`: the one of its first file.
    fn slot(&self, id: &str) -> Option<&OnceLock<Option<BuiltinProvider>>> {
        let first = BUILTIN_PROVIDERS.iter().position(|p| *p == id)?;
        Some(&self.slots[first])
    }

    /// Every built-in provider, sorted by id; parses those not parsed yet.
    pub(super) fn all(&self) -> impl Iterator<Item = &BuiltinProvider> + '_ {
        ids().filter_map(|id| self.get(id))
    }

    /// Loads the files of provider `id`, in their order, into a catalogue of their own,
    /// exactly as a full load would (the index test shows the files of one provider need
    /// no other's), and takes the provider out of it.
    fn parse(&self, id: &str) -> Result<BuiltinProvider, CatalogueError> {
        let mut catalogue = Catalogue::empty();
        for (provider, (name, json)) in BUILTIN_PROVIDERS.into_iter().zip(BUILTIN_FILES) {
            if provider != id {
                continue;
            }
            #[cfg(test)]
            self.files_parsed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            catalogue.load(Some(name), json)?;
        }
        let provider = catalogue
            .providers
            .remove(id)
            .ok_or_else(|| CatalogueError::UnknownProvider { source: None, provider: id.to_string() })?;
        let models = catalogue.models.remove(id).unwrap_or_default();
        Ok(BuiltinProvider { provider, models })
    }

    /// The ids of the providers parsed so far, sorted.
    #[cfg(test)]
    pub(super) fn parsed(&self) -> Vec<&'static str> {
        ids().filter(|id| self.slot(id).is_some_and(|slot| slot.get().is_some())).collect()
    }
}

/// The built-in provider ids, sorted, each once.
pub(super) fn ids() -> impl Iterator<Item = &'static str> {
    let mut ids = BUILTIN_PROVIDERS;
    ids.sort_unstable();
    let mut previous = None;
    ids.into_iter().filter(move |id| previous.replace(*id) != Some(*id))
}

/// A store of a test's own, installed for the calling thread.
#[cfg(test)]
pub(super) mod test_store {
    use std::cell::Cell;

    use super::Store;

    thread_local! {
        static INSTALLED: Cell<Option<&'static Store>> = const { Cell::new(None) };
    }

    pub(in super::super) fn installed() -> Option<&'static Store> {
        INSTALLED.with(Cell::get)
    }

    /// Runs `f` with a fresh store (nothing parsed) as this thread's built-in data.
    pub(in super::super) fn with_fresh<T>(f: impl FnOnce(&'static Store) -> T) -> T {
        // Leaked: a catalogue holds its store by `&'static`, like the process-wide one.
        let store: &'static Store = Box::leak(Box::new(Store::new()));
        let previous = INSTALLED.with(|cell| cell.replace(Some(store)));
        let result = f(store);
        INSTALLED.with(|cell| cell.set(previous));
        result
    }
}
