//! The component's allocator: a per-call arena. Allocating is a pointer bump; freeing
//! counts down the live allocations, and once none is live (the host has read a call's
//! results and the post-return glue has freed them) the whole arena is free again.
//!
//! The reference adapter allocates and frees thousands of small JSON values per call and
//! keeps nothing between calls, so a general-purpose allocator's bookkeeping is pure
//! cost here: with the guest's inlining, a pass over the corpus took 520 M instructions
//! with this one against 626 M with `talc` (docs/benchmarks.md, the guard). Memory never returns to the host anyway (wasm
//! memories only grow), and a call that needs more than the store's budget traps as it
//! would with any allocator. A block freed while others are live is reused at once if it
//! was the last one handed out (so a growing `Vec` or `String` on top extends in place);
//! otherwise it goes on a free list for its size class (powers of two up to 8 KiB; larger
//! blocks on one list searched first-fit), so memory freed within a call is used again
//! within it. Without that, the adapter kit's memory check caught the arena at 32 MiB on
//! a hostile tool of 20,000 properties.
//!
//! The guest is single-threaded (`wasm32-wasip2` without threads), which is what makes
//! the unsynchronized state below sound.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::UnsafeCell;
use core::ptr;

const PAGE: usize = 64 * 1024;
/// Size classes: 16, 32, ... up to `16 << (CLASSES - 1)` bytes (8 KiB); a small block
/// takes its class's whole size, so any block of a class serves any request of it.
const CLASSES: usize = 10;
const MIN_CLASS: usize = 16;
/// The largest small block; larger ones are kept for reuse on one first-fit list.
const MAX_SMALL: usize = MIN_CLASS << (CLASSES - 1);
/// Small blocks are aligned to this much, so a freed one serves any request aligned to it.
const SMALL_ALIGN: usize = 8;
/// Pages asked of the host at a time, at least: 1 MiB.
const MIN_GROW_PAGES: usize = 16;

struct State {
    /// Where the current region starts; the arena restarts here when nothing is live.
    start: usize,
    /// The next free byte.
    next: usize,
    /// The end of the current region.
    end: usize,
    /// Allocations handed out and not yet freed.
    live: usize,
    /// The first freed large block (0: none). Each holds, unaligned at its start, the
    /// next one's address and its own size.
    free: usize,
    /// The first freed block of each size class (0: none), each holding the next's address.
    small: [usize; CLASSES],
}

/// The size class of a request, if small.
fn class(size: usize) -> Option<usize> {
    if size > MAX_SMALL {
        return None;
    }
    Some(
        (size.max(MIN_CLASS).next_power_of_two().trailing_zeros() - MIN_CLASS.trailing_zeros())
            as usize,
    )
}

/// The bytes a block of `size` takes: its class's size, or its own when large.
fn taken(size: usize) -> usize {
    class(size).map_or(size, |c| MIN_CLASS << c)
}

pub struct Arena(UnsafeCell<State>);

// SAFETY: the component runs on one thread; nothing else can reach this state.
unsafe impl Sync for Arena {}

impl Arena {
    pub const fn new() -> Arena {
        Arena(UnsafeCell::new(State {
            start: 0,
            next: 0,
            end: 0,
            live: 0,
            free: 0,
            small: [0; CLASSES],
        }))
    }
}

impl State {
    /// Makes room for `size` bytes aligned to `align` by growing the memory: the new
    /// pages extend the region when they follow it, and start a new one otherwise
    /// (something else grew the memory in between; the old region is left alone).
    fn grow(&mut self, size: usize, align: usize) -> bool {
        let Some(need) = size.checked_add(align) else {
            return false;
        };
        let pages = need.div_ceil(PAGE).max(MIN_GROW_PAGES);
        let old = wasm32::memory_grow(0, pages);
        if old == usize::MAX {
            return false;
        }
        let base = old * PAGE;
        if base != self.end || self.end == 0 {
            self.start = base;
            self.next = base;
        }
        self.end = base + pages * PAGE;
        true
    }

    /// A freed large block that fits `layout`, taken off the free list.
    fn reuse(&mut self, layout: Layout) -> *mut u8 {
        let mut link: *mut usize = &mut self.free;
        // SAFETY: every address on the list is a freed block of larger than `MAX_SMALL` bytes
        // in this allocator's pages, holding its two words; `link` points at `free` or
        // at such a word.
        unsafe {
            while *link != 0 {
                let block = *link;
                let next = ptr::read_unaligned(block as *const usize);
                let size = ptr::read_unaligned((block as *const usize).add(1));
                let at = (block + layout.align() - 1) & !(layout.align() - 1);
                if at + layout.size() <= block + size {
                    *link = next;
                    self.live += 1;
                    return at as *mut u8;
                }
                link = block as *mut usize;
            }
        }
        ptr::null_mut()
    }

    fn bump(&mut self, layout: Layout) -> *mut u8 {
        let small = class(layout.size());
        match small {
            Some(c) if layout.align() <= SMALL_ALIGN && self.small[c] != 0 => {
                let block = self.small[c];
                // SAFETY: a listed small block is freed, ours, and holds the next's address.
                self.small[c] = unsafe { ptr::read(block as *const usize) };
                self.live += 1;
                return block as *mut u8;
            }
            None if self.free != 0 => {
                let reused = self.reuse(layout);
                if !reused.is_null() {
                    return reused;
                }
            }
            _ => {}
        }
        let size = taken(layout.size());
        let align = if small.is_some() {
            layout.align().max(SMALL_ALIGN)
        } else {
            layout.align()
        };
        let mut at = (self.next + align - 1) & !(align - 1);
        if at.checked_add(size).is_none_or(|e| e > self.end) || self.end == 0 {
            if !self.grow(size, align) {
                return ptr::null_mut();
            }
            at = (self.next + align - 1) & !(align - 1);
        }
        self.next = at + size;
        self.live += 1;
        at as *mut u8
    }
}

// SAFETY: every block handed out lies in pages this allocator grew, inside the current
// region, and is never handed out again while live: `next` only moves back over a block
// being freed that is the last one handed out, or to `start` when no block is live.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: single-threaded (see `Sync` above), and no reference to the state
        // outlives this call.
        let s = unsafe { &mut *self.0.get() };
        s.bump(layout)
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: as in `alloc`.
        let s = unsafe { &mut *self.0.get() };
        s.live = s.live.saturating_sub(1);
        let size = taken(layout.size());
        if s.live == 0 {
            s.next = s.start;
            s.free = 0;
            s.small = [0; CLASSES];
        } else if block as usize + size == s.next {
            s.next = block as usize;
        } else if let Some(c) = class(layout.size()) {
            // SAFETY: the block is ours, no longer live, aligned to `SMALL_ALIGN` and at
            // least `MIN_CLASS` bytes: room for the list's word.
            unsafe { ptr::write(block as *mut usize, s.small[c]) };
            s.small[c] = block as usize;
        } else {
            // SAFETY: the block is ours, no longer live and larger than `MAX_SMALL` bytes long,
            // room for the two words written unaligned at its start.
            unsafe {
                ptr::write_unaligned(block as *mut usize, s.free);
                ptr::write_unaligned((block as *mut usize).add(1), layout.size());
            }
            s.free = block as usize;
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let s = unsafe { &mut *self.0.get() };
        let at = block as usize;
        if taken(new_size) <= taken(layout.size()) {
            // The block's class already holds the new size.
            if class(new_size).is_some() == class(layout.size()).is_some() {
                return block;
            }
        }
        if at + taken(layout.size()) == s.next
            && at.checked_add(taken(new_size)).is_some_and(|e| e <= s.end)
        {
            s.next = at + taken(new_size);
            return block;
        }
        // SAFETY: the caller guarantees `layout.align()` is a valid alignment and
        // `new_size`, rounded up to it, does not overflow.
        let grown = s.bump(unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) });
        if !grown.is_null() {
            // SAFETY: both blocks are live, distinct, and at least this long.
            unsafe { ptr::copy_nonoverlapping(block, grown, layout.size().min(new_size)) };
            // SAFETY: `block` was allocated here with `layout`.
            unsafe { self.dealloc(block, layout) };
        }
        grown
    }
}
