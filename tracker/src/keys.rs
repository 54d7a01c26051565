//! Cells by key: how a plain number (a ticket's slot) finds its signal's
//! cell, on any thread, without a lock and without a pointer anyone could
//! forge.
//!
//! Every cell a tracker adopts gets the next key, 0, 1, 2..., for good, and
//! a place in the [`Directory`], read by every thread (waiters, holders,
//! the tracker checking a ticket): pages that double in size as the tracker
//! adopts more signals, each created once and never moved, so a reader
//! finds key `k` by arithmetic and two loads, and a key no cell has yet
//! finds nothing. The cells are reference-counted: the tracker's own hot
//! path holds them directly (its ring's slots, its spares, its parked
//! signals), and reaches one with no lookup at all.
//!
//! A key alone proves nothing: a ticket is checked against the cell it names
//! (the use the cell serves, or that the use retired before it moved on),
//! see [`Shared::cell_of`](crate::share::Shared::cell_of).

use crate::sync::Arc;
use std::sync::OnceLock;

/// The key of a cell: its index in its tracker's tables, as a ticket
/// carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CellKey(pub(crate) u32);

impl CellKey {
    /// The key as a ticket's slot carries it.
    pub const fn slot(self) -> u32 {
        self.0
    }
}

impl CellKey {
    /// The key as an index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Keys of the first page: 64, then 128, 256... (page `p` holds
/// `FIRST << p`), so 27 pages cover every `u32` key.
const FIRST_BITS: u32 = 6;
const FIRST: u64 = 1 << FIRST_BITS;
const PAGES: usize = 27;

/// The page of key `key`, and its index in that page.
const fn locate(key: u32) -> (usize, usize) {
    let shifted = key as u64 + FIRST;
    let page = (63 - shifted.leading_zeros() - FIRST_BITS) as usize;
    (page, (shifted - (FIRST << page)) as usize)
}

const _: () = assert!(locate(u32::MAX).0 < PAGES);

type Page<T> = Box<[OnceLock<Arc<T>>]>;

/// Every cell a tracker adopted (`T`: its cells' type), by key, for
/// readers on any thread.
pub(crate) struct Directory<T> {
    pages: [OnceLock<Page<T>>; PAGES],
}

impl<T> Default for Directory<T> {
    fn default() -> Self {
        Self {
            pages: [const { OnceLock::new() }; PAGES],
        }
    }
}

impl<T> Directory<T> {
    /// The cell of `key`, if one was adopted under it.
    #[inline]
    pub(crate) fn get(&self, key: u32) -> Option<&Arc<T>> {
        let (page, at) = locate(key);
        self.pages[page].get()?.get(at)?.get()
    }

    /// Puts `cell` under `key` (the next key: the owner adopts one at a
    /// time). False if the key was taken, which cannot happen.
    pub(crate) fn insert(&self, key: u32, cell: Arc<T>) -> bool {
        let (page, at) = locate(key);
        let entries = self.pages[page].get_or_init(|| {
            (0..FIRST << page)
                .map(|_| OnceLock::new())
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        entries[at].set(cell).is_ok()
    }

    /// Every cell, in key order (for teardown).
    pub(crate) fn cells(&self) -> impl Iterator<Item = &Arc<T>> {
        self.pages
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|page| page.iter().map_while(OnceLock::get))
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests {
    use super::*;

    #[test]
    fn pages_double_and_cover_every_key() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(63), (0, 63));
        assert_eq!(locate(64), (1, 0));
        assert_eq!(locate(191), (1, 127));
        assert_eq!(locate(192), (2, 0));
        // Consecutive keys land on consecutive entries, page after page.
        let mut previous = locate(0);
        for key in 1..100_000u32 {
            let here = locate(key);
            let next_in_page = (previous.0, previous.1 + 1);
            let next_page = (previous.0 + 1, 0);
            assert!(
                here == next_in_page || here == next_page,
                "key {key}: {here:?}"
            );
            if here == next_page {
                assert_eq!(
                    previous.1 as u64 + 1,
                    FIRST << previous.0,
                    "page {} full",
                    previous.0
                );
            }
            previous = here;
        }
        assert_eq!(locate(u32::MAX).0, PAGES - 1);
    }
}
