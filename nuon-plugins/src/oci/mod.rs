//! OCI artifacts on the runner side: the OCI image layout store (the
//! embedded default for the vendor's and each install's store) and
//! Terraform modules packaged as OpenTofu module packages.

pub mod helmpkg;
#[cfg(feature = "registry")]
pub mod helmrepo;
pub mod layout;
pub mod modulepkg;
#[cfg(feature = "registry")]
pub mod registry;

pub use layout::LayoutStore;

#[cfg(test)]
mod tests;
