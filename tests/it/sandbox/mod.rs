//! The kernel sandbox: what each mode lets a command do, tried by hostile commands.

mod caches;
mod cgroup_v2;
mod cost;
mod economy;
mod engine;
mod escapees;
mod fs;
mod hostile;
mod logs;
mod net;
mod off;
mod partial_ids;
mod secrets;
mod served;
mod support;
mod syscalls;
mod unprivileged;
mod view;
mod wsl;
mod zygote;
