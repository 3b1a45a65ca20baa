//! Files a plugin holds open, counted across all its instances.
//!
//! Each file or directory a plugin opens under a `files` grant is a
//! descriptor of the host process. One instance may hold at most
//! `MAX_HANDLES` host handles (state.rs), but a plugin with session
//! instances has up to a thousand of them, which would let one plugin use
//! up the host's descriptors and with them its connections, trail and
//! store. So the host takes over two of WASI's imports from wasmtime-wasi,
//! `descriptor.open-at` and the descriptor's drop: each open takes one of
//! the plugin's [`OPEN_FILES`] places first and an open beyond them fails
//! with the `quota` error code. The work itself is still wasmtime-wasi's.
//!
//! A place is given back when the host closes the descriptor. A file's
//! streams (`read-via-stream`, `write-via-stream`, `append-via-stream`)
//! hold the file open on their own, so a file dropped while a stream of it
//! lives keeps its place until the stream is gone too; the instance sees
//! that at its next open, and when it is dropped.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::filesystem::{Descriptor as Opened, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    Descriptor, DescriptorFlags, ErrorCode, Host, HostDescriptor, OpenFlags, PathFlags,
};

use super::state::{PluginShared, PluginState};

/// Files and directories one plugin may hold open at once, over all its
/// instances. The directories a grant gives it are not counted.
pub const OPEN_FILES: u32 = 4_096;

/// The WASI interface whose imports are taken over, as wasmtime-wasi
/// names it. [`count_in`] fails, and with it every plugin's load, if the
/// linker has no such interface (a wasmtime-wasi that names another
/// version), rather than leaving the files uncounted.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";
const OPEN_AT: &str = "[method]descriptor.open-at";

/// A plugin's count of open files, shared by its instances.
#[derive(Debug, Default)]
pub struct OpenFiles {
    held: AtomicU32,
}

impl OpenFiles {
    /// Takes a place, if one is left.
    fn take(&self) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < OPEN_FILES).then_some(held + 1)
            })
            .is_ok()
    }

    /// Gives back `count` places.
    fn give_back(&self, count: usize) {
        let count = u32::try_from(count).expect("at most OPEN_FILES places");
        self.held.fetch_sub(count, Ordering::AcqRel);
    }

    /// How many places are taken.
    pub fn held(&self) -> u32 {
        self.held.load(Ordering::Acquire)
    }
}

/// The files one instance holds places for.
#[derive(Default)]
pub(super) struct InstanceFiles {
    /// Descriptors it opened, by their handle.
    open: std::collections::HashSet<u32>,
    /// Files whose descriptor it dropped while a stream of theirs lived.
    lingering: Vec<Weak<std::fs::File>>,
}

impl InstanceFiles {
    /// Gives back the places of lingering files whose streams are gone.
    fn sweep(&mut self, shared: &PluginShared) {
        let before = self.lingering.len();
        self.lingering.retain(|file| file.strong_count() > 0);
        shared.open_files.give_back(before - self.lingering.len());
    }

    /// Gives back every place, when the instance is dropped (its table
    /// closes what it still holds).
    pub(super) fn close_all(&mut self, shared: &PluginShared) {
        shared
            .open_files
            .give_back(self.open.len() + self.lingering.len());
        self.open.clear();
        self.lingering.clear();
    }
}

/// A place taken for an open under way: given back if the open fails or
/// its call is dropped part-way (a timeout), kept once the descriptor is
/// in the instance's table.
struct Place(Option<Arc<PluginShared>>);

impl Place {
    fn take(shared: &Arc<PluginShared>) -> Option<Place> {
        shared
            .open_files
            .take()
            .then(|| Place(Some(shared.clone())))
    }

    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(shared) = &self.0 {
            shared.open_files.give_back(1);
        }
    }
}

/// Replaces wasmtime-wasi's `open-at` and descriptor drop in `linker`
/// (which must already hold them) with the counting ones.
pub(super) fn count_in(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    // Defining `open-at` again without shadowing must fail: it proves the
    // interface is there to be taken over.
    let probe = linker
        .instance(FILESYSTEM_TYPES)?
        .func_wrap(OPEN_AT, |_, (): ()| Ok(()));
    if probe.is_ok() {
        wasmtime::bail!(
            "wasmtime-wasi does not define {FILESYSTEM_TYPES}#{OPEN_AT}, so open files cannot be counted"
        );
    }
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        OPEN_AT,
        |mut store,
         (dir, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let state: &mut PluginState = store.data_mut();
                let shared = state.shared.clone();
                state.held_files.sweep(&shared);
                let Some(place) = Place::take(&shared) else {
                    state.files_refused();
                    return Ok((Err(ErrorCode::Quota),));
                };
                let mut fs = state.filesystem();
                match fs.open_at(dir, path_flags, path, open_flags, flags).await {
                    Ok(file) => {
                        state.held_files.open.insert(file.rep());
                        place.keep();
                        Ok((Ok(file),))
                    }
                    Err(e) => Ok((Err(fs.convert_error_code(e)?),)),
                }
            })
        },
    )?;
    types.resource(
        "descriptor",
        ResourceType::host::<Descriptor>(),
        |mut store, rep| {
            let state: &mut PluginState = store.data_mut();
            let counted = state.held_files.open.contains(&rep);
            let mut fs = state.filesystem();
            // Seen before the descriptor goes: a stream may hold the file.
            let file = match fs.table.get(&Resource::<Descriptor>::new_own(rep)) {
                Ok(Opened::File(file)) if counted => Some(Arc::downgrade(&file.file)),
                _ => None,
            };
            // A drop that fails traps, and the instance with its places goes.
            HostDescriptor::drop(&mut fs, Resource::new_own(rep))?;
            if state.held_files.open.remove(&rep) {
                match file.filter(|f| f.strong_count() > 0) {
                    Some(lingering) => state.held_files.lingering.push(lingering),
                    None => state.shared.open_files.give_back(1),
                }
            }
            Ok(())
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
