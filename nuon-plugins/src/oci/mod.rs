//! OCI artifacts on the runner side: the OCI image layout store (the
//! embedded default for the vendor's and each install's store).

pub mod layout;

pub use layout::LayoutStore;

#[cfg(test)]
mod tests;
