//! The [`EngineFile`](crate::engine::EngineFile) of a library whose file has no
//! positioned I/O and buffers writes (`tokio::fs`, `async-fs`): a seek plus a
//! read or write under the file's lock, every write followed by `flush`,
//! which reports the real result.
//!
//! The two libraries' files have the same methods under different traits
//! (tokio's `AsyncReadExt` against futures'), so this is a macro: the caller
//! brings its library's traits into scope and names how its file closes.

/// Implements `EngineFile` for `$file { file: Mutex<_>, append: bool }`;
/// `close: |f| expr` ends the file (`f` is the unlocked library file).
macro_rules! seeking_engine_file {
    ($file:ty, close: |$f:ident| $close:expr) => {
        impl $crate::engine::EngineFile for $file {
            async fn read_at(&self, mut buf: Vec<u8>, offset: u64) -> $crate::engine::BufResult {
                let mut file = self.file.lock().await;
                let result = match file.seek(std::io::SeekFrom::Start(offset)).await {
                    Ok(_) => file.read(&mut buf).await,
                    Err(e) => Err(e),
                };
                (result, buf)
            }

            async fn read(&self, mut buf: Vec<u8>) -> $crate::engine::BufResult {
                let result = self.file.lock().await.read(&mut buf).await;
                (result, buf)
            }

            async fn write_at(&self, buf: Vec<u8>, offset: u64) -> $crate::engine::BufResult {
                let mut file = self.file.lock().await;
                let result = async {
                    // O_APPEND writes land at the end whatever the position.
                    if !self.append {
                        file.seek(std::io::SeekFrom::Start(offset)).await?;
                    }
                    let n = file.write(&buf).await?;
                    file.flush().await?;
                    Ok(n)
                }
                .await;
                (result, buf)
            }

            async fn fsync(&self) -> std::io::Result<()> {
                let mut file = self.file.lock().await;
                file.flush().await?;
                file.sync_all().await
            }

            async fn fdatasync(&self) -> std::io::Result<()> {
                let mut file = self.file.lock().await;
                file.flush().await?;
                file.sync_data().await
            }

            async fn set_len(&self, len: u64) -> std::io::Result<()> {
                self.file.lock().await.set_len(len).await
            }

            async fn metadata(&self) -> std::io::Result<$crate::engine::Metadata> {
                let meta = self.file.lock().await.metadata().await?;
                Ok($crate::engine::Metadata { len: meta.len() })
            }

            async fn close(self) -> std::io::Result<()> {
                let mut $f = self.file.into_inner();
                $close
            }
        }
    };
}

pub(crate) use seeking_engine_file;
