//! # jig-api
