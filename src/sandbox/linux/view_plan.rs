//! The view plan: what a command's mount namespace shows (writable places, private temp dir),
//! prepared in the parent for [`child::view::build`](super::child::view::build).

use std::path::Path;

use super::child::view::View;
use crate::sandbox::{Mode, Roots};

/// The view for `mode`: what is writable, and the private temp dir of read-only mode.
pub(crate) fn view_for(mode: Mode, roots: &Roots) -> View {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
    let workspace = roots
        .workspace
        .canonicalize()
        .unwrap_or(roots.workspace.clone());
    let temp = roots.temp.canonicalize().unwrap_or(roots.temp.clone());
    let mut view = View {
        private_shm: Path::new("/dev/shm").is_dir(),
        ..View::default()
    };
    match mode {
        Mode::Workspace => {
            view.writable = [&workspace, &temp]
                .into_iter()
                .filter_map(|p| c(p))
                .collect();
        }
        Mode::ReadOnly => {
            view.private_temp = c(&temp);
            if workspace.starts_with(&temp) {
                view.keep_inside_temp = c(&workspace);
                view.keep_parents = workspace
                    .ancestors()
                    .skip(1)
                    .take_while(|p| p.starts_with(&temp) && *p != temp)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .filter_map(c)
                    .collect();
            }
        }
        Mode::Full | Mode::Off => {}
    }
    view
}
