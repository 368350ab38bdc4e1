//! The reference model: a sparse file in memory (offsets past 4 GiB cost nothing).

use std::collections::HashMap;

const PAGE: u64 = 4096;

/// What a file's bytes should be.
#[derive(Debug, Default, Clone)]
pub struct SparseFile {
    size: u64,
    pages: HashMap<u64, Box<[u8; PAGE as usize]>>,
}

impl SparseFile {
    /// Current length.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Writes `data` at `offset`, extending (with zeros) as needed.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        for (i, byte) in data.iter().enumerate() {
            let at = offset + i as u64;
            let page = self
                .pages
                .entry(at / PAGE)
                .or_insert_with(|| Box::new([0; PAGE as usize]));
            page[(at % PAGE) as usize] = *byte;
        }
        self.size = self.size.max(offset + data.len() as u64);
    }

    /// Bytes `[offset, offset + len)`, clipped at the end of the file.
    pub fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let end = (offset + len as u64).min(self.size);
        (offset..end.max(offset))
            .map(|at| {
                self.pages
                    .get(&(at / PAGE))
                    .map_or(0, |p| p[(at % PAGE) as usize])
            })
            .collect()
    }

    /// Truncates or extends with zeros.
    pub fn set_len(&mut self, len: u64) {
        if len < self.size {
            // Zero the tail of the last kept page, drop pages past it.
            let keep_from = len;
            for at in keep_from..((len / PAGE + 1) * PAGE).min(self.size) {
                if let Some(page) = self.pages.get_mut(&(at / PAGE)) {
                    page[(at % PAGE) as usize] = 0;
                }
            }
            self.pages.retain(|&index, _| index * PAGE < len);
        }
        self.size = len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_reads_zero_fill_and_truncate_forgets() {
        let mut f = SparseFile::default();
        f.write(1 << 32, b"far");
        assert_eq!(f.len(), (1 << 32) + 3);
        assert_eq!(f.read((1 << 32) - 2, 5), b"\0\0far");
        f.write(10, b"abc");
        f.set_len(11);
        f.set_len(20);
        assert_eq!(f.read(9, 5), b"\0a\0\0\0");
    }
}
