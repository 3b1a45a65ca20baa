//! Files a plugin holds open, counted across all its instances.
//!
//! Each file or directory a plugin opens under a `files` grant is a
//! descriptor of the host process. One instance may hold at most
//! `MAX_HANDLES` host handles (state.rs), but a plugin with session
//! instances has up to a thousand of them, which would let one plugin use
//! up the host's descriptors and with them its connections, trail and
//! store. So the host takes over two of WASI's imports from wasmtime-wasi,
//! `descriptor.open-at` and the descriptor's drop: each open takes one of
//! the plugin's [`OPEN_FILES`] places first and each drop gives it back,
//! and an open beyond them fails with the `quota` error code. The work
//! itself is still wasmtime-wasi's.

use std::sync::atomic::{AtomicU32, Ordering};

use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    Descriptor, DescriptorFlags, ErrorCode, Host, HostDescriptor, OpenFlags, PathFlags,
};

use super::state::PluginState;

/// Files and directories one plugin may hold open at once, over all its
/// instances. The directories a grant gives it are not counted.
pub const OPEN_FILES: u32 = 4_096;

/// The WASI interface whose imports are taken over, as wasmtime-wasi
/// names it. wasmtime is pinned; `files_are_counted_per_plugin` in the
/// hostile-plugin tests fails if a new version names it otherwise.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

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
    pub(super) fn give_back(&self, count: u32) {
        self.held.fetch_sub(count, Ordering::AcqRel);
    }

    /// How many places are taken.
    pub fn held(&self) -> u32 {
        self.held.load(Ordering::Acquire)
    }
}

/// Replaces wasmtime-wasi's `open-at` and descriptor drop in `linker`
/// (which already holds them) with the counting ones.
pub(super) fn count_in(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
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
                if !state.shared.open_files.take() {
                    state.files_refused();
                    return Ok((Err(ErrorCode::Quota),));
                }
                let mut fs = state.filesystem();
                let opened = fs.open_at(dir, path_flags, path, open_flags, flags).await;
                let opened = match opened {
                    Ok(file) => Ok(file),
                    Err(e) => Err(fs.convert_error_code(e)),
                };
                match opened {
                    Ok(file) => {
                        state.opened_files.insert(file.rep());
                        Ok((Ok(file),))
                    }
                    Err(code) => {
                        state.shared.open_files.give_back(1);
                        Ok((Err(code?),))
                    }
                }
            })
        },
    )?;
    types.resource(
        "descriptor",
        ResourceType::host::<Descriptor>(),
        |mut store, rep| {
            let state: &mut PluginState = store.data_mut();
            HostDescriptor::drop(&mut state.filesystem(), Resource::new_own(rep))?;
            if state.opened_files.remove(&rep) {
                state.shared.open_files.give_back(1);
            }
            Ok(())
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
