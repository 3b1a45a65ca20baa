//! Files a plugin holds open, counted across all its instances.
//!
//! Each file or directory a plugin opens under a `files` grant is a
//! descriptor of the host process. One instance may hold at most 4 096
//! host handles (fewer with less memory; state.rs), but a plugin with
//! session instances has up to a thousand of them, which would let one
//! plugin use up the host's descriptors and with them its connections,
//! trail and store. So the host takes over two of WASI's imports from
//! wasmtime-wasi, `descriptor.open-at` and the descriptor's drop: each
//! open takes one of the plugin's places first and an open beyond them
//! fails with the `quota` error code. The work itself is still
//! wasmtime-wasi's. A plugin has [`OPEN_FILES`] places, or fewer when the
//! process's limit on open files would not leave the host what it needs
//! beside them (`serve` works out the share; see
//! [`Sandbox::hold_open_files_to`](super::Sandbox::hold_open_files_to)).
//!
//! A place is given back when the file is really closed. A file's streams
//! (`read-via-stream`, `write-via-stream`, `append-via-stream`) hold it
//! open on their own, and so does a host thread still reading or writing
//! it for a call that ended part-way: a file dropped (or whose instance
//! went) while so held keeps its place until it closes, which is looked at
//! when the plugin's places run out. An open itself still under way on a
//! host thread when its call ends gives its place back at once.
//!
//! A directory's listing (`read-directory`) is read whole into host memory
//! before the guest sees its first entry, and each listing stream is a
//! handle of its own: the host also takes over `read-directory` and the
//! stream's drop, so that a plugin holds at most [`LISTINGS`] listings at
//! once over its instances, not one per handle.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};

use wasmtime::component::{Linker, Resource, ResourceTable, ResourceType};
use wasmtime_wasi::filesystem::{Descriptor as Opened, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    Descriptor, DescriptorFlags, DirectoryEntryStream, ErrorCode, Host, HostDescriptor,
    HostDirectoryEntryStream, OpenFlags, PathFlags,
};

use super::places::Places;
use super::state::{PluginShared, PluginState};

/// Files and directories one plugin may hold open at once, over all its
/// instances, when the process's limit on open files allows it. The
/// directories a grant gives it are not counted.
pub const OPEN_FILES: u32 = 4_096;

/// Directory listings one plugin may hold at once, over all its instances.
pub const LISTINGS: u32 = 16;

/// The WASI interface whose imports are taken over, as wasmtime-wasi
/// names it. [`count_in`] fails, and with it every plugin's load, if the
/// linker has no such interface (a wasmtime-wasi that names another
/// version), rather than leaving the files uncounted.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";
const OPEN_AT: &str = "[method]descriptor.open-at";
const READ_DIRECTORY: &str = "[method]descriptor.read-directory";

/// A plugin's count of open files, shared by its instances.
#[derive(Debug)]
pub struct OpenFiles {
    /// [`OPEN_FILES`] places or fewer.
    files: Places,
    /// Files no descriptor of the plugin names any more that were still
    /// open when it let go of them (a stream of theirs, or a host thread
    /// finishing a read, held them). Each keeps its place until it is
    /// really closed, which is looked at when the places run out.
    lingering: Mutex<Vec<Weak<std::fs::File>>>,
    /// Directory listings its instances hold.
    listings: Places,
}

impl OpenFiles {
    /// A count with `places` places, at most [`OPEN_FILES`].
    pub fn new(places: u32) -> OpenFiles {
        OpenFiles {
            files: Places::new(places.min(OPEN_FILES)),
            lingering: Mutex::default(),
            listings: Places::new(LISTINGS),
        }
    }

    /// How many files the plugin may hold open at once.
    pub fn places(&self) -> u32 {
        self.files.max()
    }

    /// Takes a place, if one is left, once the lingering files that have
    /// closed since have given theirs back.
    fn take(&self) -> bool {
        self.files.take() || (self.sweep() > 0 && self.files.take())
    }

    /// Gives back `count` places.
    fn give_back(&self, count: usize) {
        self.files.give_back(count);
    }

    /// Gives back a place now if `file` is closed, else once it is.
    fn let_go(&self, file: Weak<std::fs::File>) {
        self.let_go_all(0, vec![file]);
    }

    /// Gives back `closed` places and those of `files` already closed, in
    /// one update (so no open sees only part of them back); the files
    /// still open keep theirs in the lingering list.
    fn let_go_all(&self, closed: usize, mut files: Vec<Weak<std::fs::File>>) {
        let before = files.len();
        files.retain(|file| file.strong_count() > 0);
        let freed = closed + before - files.len();
        if !files.is_empty() {
            self.lingering
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .append(&mut files);
        }
        self.give_back(freed);
    }

    /// Gives back the places of lingering files now closed; how many.
    fn sweep(&self) -> usize {
        let mut lingering = self.lingering.lock().unwrap_or_else(|p| p.into_inner());
        let before = lingering.len();
        lingering.retain(|file| file.strong_count() > 0);
        let freed = before - lingering.len();
        self.give_back(freed);
        freed
    }
}

/// The descriptors one instance opened that hold places, by their handle.
#[derive(Default)]
pub(super) struct InstanceFiles {
    open: HashSet<u32>,
    /// The directory listings it holds, by their handle.
    listings: HashSet<u32>,
}

impl InstanceFiles {
    /// Gives back the instance's places as its `table` goes: a place at
    /// once for a file the table held alone, later for one a host thread
    /// still holds (a call ended part-way, such as by its timeout).
    pub(super) fn close_all(&mut self, table: ResourceTable, shared: &PluginShared) {
        let mut files = Vec::new();
        // A directory's handle is copied only for one operation: its place
        // comes back at once.
        let mut directories = 0;
        for rep in self.open.drain() {
            match table.get(&Resource::<Descriptor>::new_own(rep)) {
                Ok(Opened::File(file)) => files.push(Arc::downgrade(&file.file)),
                _ => directories += 1,
            }
        }
        drop(table);
        shared.open_files.let_go_all(directories, files);
        shared.open_files.listings.give_back(self.listings.len());
        self.listings.clear();
    }
}

/// A place taken for an open (or a listing) under way: given back if it
/// fails or its call is dropped part-way (a timeout), kept once the
/// descriptor (or stream) is in the instance's table.
struct Place {
    shared: Option<Arc<PluginShared>>,
    give_back: fn(&OpenFiles),
}

impl Place {
    fn file(shared: &Arc<PluginShared>) -> Option<Place> {
        shared.open_files.take().then(|| Place {
            shared: Some(shared.clone()),
            give_back: |files| files.give_back(1),
        })
    }

    fn listing(shared: &Arc<PluginShared>) -> Option<Place> {
        shared.open_files.listings.take().then(|| Place {
            shared: Some(shared.clone()),
            give_back: |files| files.listings.give_back(1),
        })
    }

    fn keep(mut self) {
        self.shared = None;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            (self.give_back)(&shared.open_files);
        }
    }
}

/// Replaces wasmtime-wasi's `open-at` and descriptor drop in `linker`
/// (which must already hold them) with the counting ones.
pub(super) fn count_in(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    let imports = [OPEN_AT, READ_DIRECTORY];
    super::take_over(linker, FILESYSTEM_TYPES, &imports, "open files", |types| {
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
                    let Some(place) = Place::file(&state.shared) else {
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
                    match file {
                        Some(file) => state.shared.open_files.let_go(file),
                        None => state.shared.open_files.give_back(1),
                    }
                }
                Ok(())
            },
        )?;
        types.func_wrap_async(
            READ_DIRECTORY,
            |mut store, (dir,): (Resource<Descriptor>,)| {
                Box::new(async move {
                    let state: &mut PluginState = store.data_mut();
                    let Some(listing) = Place::listing(&state.shared) else {
                        state.listings_refused();
                        return Ok((Err(ErrorCode::Quota),));
                    };
                    let mut fs = state.filesystem();
                    match fs.read_directory(dir).await {
                        Ok(stream) => {
                            state.held_files.listings.insert(stream.rep());
                            listing.keep();
                            Ok((Ok(stream),))
                        }
                        Err(e) => Ok((Err(fs.convert_error_code(e)?),)),
                    }
                })
            },
        )?;
        types.resource(
            "directory-entry-stream",
            ResourceType::host::<DirectoryEntryStream>(),
            |mut store, rep| {
                let state: &mut PluginState = store.data_mut();
                HostDirectoryEntryStream::drop(&mut state.filesystem(), Resource::new_own(rep))?;
                if state.held_files.listings.remove(&rep) {
                    state.shared.open_files.listings.give_back(1);
                }
                Ok(())
            },
        )?;
        Ok(())
    })
}
