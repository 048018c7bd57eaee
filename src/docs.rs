//! Guides: the longer explanations of what the layer does, each a page of
//! its own. They are the repository's `docs/*.md`. Their examples that can
//! run offline run as doctests. The README is the front door. These are the
//! rooms behind it. The guides to a person's login and to DPoP are the pages
//! of their modules, [`login`](crate::login) and [`dpop`](crate::dpop).

#[doc = include_str!("../docs/settings.md")]
pub mod settings {}

#[doc = include_str!("../docs/reqwest.md")]
pub mod reqwest {}

#[doc = include_str!("../docs/credentials.md")]
pub mod credentials {}

#[doc = include_str!("../docs/recipes.md")]
pub mod recipes {}

#[doc = include_str!("../docs/many_tokens.md")]
pub mod many_tokens {}

#[doc = include_str!("../docs/resources.md")]
pub mod resources {}

#[doc = include_str!("../docs/replicas.md")]
pub mod replicas {}

#[doc = include_str!("../docs/failures.md")]
pub mod failures {}

#[doc = include_str!("../docs/refresh_tokens.md")]
pub mod refresh_tokens {}

#[doc = include_str!("../docs/fapi.md")]
pub mod fapi {}

#[doc = include_str!("../docs/agent_approval.md")]
pub mod agent_approval {}
