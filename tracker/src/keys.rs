//! Cells by key: how a plain number (a ticket's slot) finds its signal's
//! cell, on any thread, without a lock and without a pointer anyone could
//! forge.
//!
//! Every cell a tracker adopts gets the next key, 0, 1, 2..., for good. Two
//! tables hold it, as reference-counted cells:
//!
//! - the [`Directory`], read by every thread (waiters, holders, the tracker
//!   validating a ticket): pages that double in size as the tracker adopts
//!   more signals, each created once and never moved, so a reader finds key
//!   `k` by arithmetic and two loads, and a key no cell has yet finds
//!   nothing;
//! - the owner's [`Table`], a plain vector indexed by key, which the tracker
//!   itself reads on its hot path (one bounds check and one load).
//!
//! A key alone proves nothing: a ticket is checked against the cell it names
//! (the use the cell serves, or that the use retired before it moved on),
//! see [`Shared::cell_of`](crate::share::Shared::cell_of).

use crate::share::Cell;
use crate::sync::Arc;
use std::sync::OnceLock;

/// The key of a cell: its index in its tracker's tables, as a ticket
/// carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CellKey(pub(crate) u32);

impl CellKey {
    pub(crate) const fn index(self) -> usize {
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

type Page<S> = Box<[OnceLock<Arc<Cell<S>>>]>;

/// Every cell a tracker adopted, by key, for readers on any thread.
pub(crate) struct Directory<S> {
    pages: [OnceLock<Page<S>>; PAGES],
}

impl<S> Default for Directory<S> {
    fn default() -> Self {
        Self {
            pages: [const { OnceLock::new() }; PAGES],
        }
    }
}

impl<S> Directory<S> {
    /// The cell of `key`, if one was adopted under it.
    #[inline]
    pub(crate) fn get(&self, key: u32) -> Option<&Arc<Cell<S>>> {
        let (page, at) = locate(key);
        self.pages[page].get()?.get(at)?.get()
    }

    /// Puts `cell` under `key` (the next key: the owner adopts one at a
    /// time). False if the key was taken, which cannot happen.
    pub(crate) fn insert(&self, key: u32, cell: Arc<Cell<S>>) -> bool {
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
    pub(crate) fn cells(&self) -> impl Iterator<Item = &Arc<Cell<S>>> {
        self.pages
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|page| page.iter().map_while(OnceLock::get))
    }
}

/// The owner's view of its cells: the same cells, by key, in a vector only
/// it reads and grows.
pub(crate) struct Table<S> {
    cells: Vec<Arc<Cell<S>>>,
}

impl<S> Default for Table<S> {
    fn default() -> Self {
        Self { cells: Vec::new() }
    }
}

impl<S> Table<S> {
    /// The cell of `key`, which this table's owner adopted.
    ///
    /// # Panics
    /// For a key it never handed out: the owner only keeps keys its own
    /// adoptions returned, so that is a bug of the tracker's.
    #[inline(always)]
    pub(crate) fn get(&self, key: CellKey) -> &Cell<S> {
        &self.cells[key.index()]
    }

    /// Keeps a cell the shared directory just adopted under the next key.
    pub(crate) fn push(&mut self, key: CellKey, cell: Arc<Cell<S>>) {
        debug_assert_eq!(
            key.index(),
            self.cells.len(),
            "keys are handed out in order"
        );
        self.cells.push(cell);
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
