//! Descriptors passed over a Unix seqpacket (or stream) socket: one message is a one-byte tag and
//! the descriptors it carries (`SCM_RIGHTS`). The containment's zygote and a run's tools channel
//! both speak it.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A closed peer is an error to report, not a SIGPIPE to die of (Linux; elsewhere the flag does
/// not exist).
#[cfg(target_os = "linux")]
const NO_SIGPIPE: i32 = libc::MSG_NOSIGNAL;
#[cfg(not(target_os = "linux"))]
const NO_SIGPIPE: i32 = 0;

/// Descriptors arrive close-on-exec at once where the kernel can (Linux); elsewhere they are
/// marked right after.
#[cfg(target_os = "linux")]
const CLOEXEC_ON_RECEIPT: i32 = libc::MSG_CMSG_CLOEXEC;
#[cfg(not(target_os = "linux"))]
const CLOEXEC_ON_RECEIPT: i32 = 0;

/// Sends one message: the byte `tag` and `fds` (none is fine), with `flags` (e.g.
/// `MSG_DONTWAIT`) beside the daemon's own.
pub fn send_message(socket: RawFd, tag: u8, fds: &[RawFd], flags: i32) -> io::Result<()> {
    let mut byte = [tag];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let payload = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; every pointer set below points into buffers alive for the
    // sendmsg call, and the control buffer is as large as CMSG_SPACE asks.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        if !fds.is_empty() {
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = space as _;
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(header),
                payload,
            );
        }
        loop {
            if libc::sendmsg(socket, &message, NO_SIGPIPE | flags) == 1 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// Receives one message, its tag and its descriptors (close-on-exec), room made for at most
/// `max_fds` of them, with `flags` (`MSG_DONTWAIT`: `WouldBlock` when none is waiting); `None`
/// when the peer has closed the socket.
pub fn recv_message(
    socket: RawFd,
    max_fds: usize,
    flags: i32,
) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let payload = max_fds * std::mem::size_of::<RawFd>();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: as in send_message; the descriptors the kernel installed are taken into OwnedFds
    // exactly once each.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = space as _;
        let n = loop {
            let n = libc::recvmsg(socket, &mut message, CLOEXEC_ON_RECEIPT | flags);
            if n >= 0 {
                break n;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        };
        if n == 0 {
            return Ok(None);
        }
        let mut fds = Vec::new();
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header);
                let len = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let mut fd: RawFd = 0;
                    std::ptr::copy_nonoverlapping(
                        data.add(i * std::mem::size_of::<RawFd>()),
                        (&mut fd as *mut RawFd).cast::<u8>(),
                        std::mem::size_of::<RawFd>(),
                    );
                    if CLOEXEC_ON_RECEIPT == 0 {
                        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                    }
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
        Ok(Some((byte[0], fds)))
    }
}
