//! Fuzzer bytes read as a sequence of small choices, so that structured inputs (requirement
//! lists, selectors, label sets) come from few bytes and reuse a small alphabet of keys and
//! values, where collisions between them make the interesting cases.

/// A cursor over fuzzer bytes; reads past the end give zeros, so every input is a program.
#[derive(Debug, Clone)]
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// The next byte, or 0 once the input is used up.
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n
    }

    /// One of `items` (non-empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}
