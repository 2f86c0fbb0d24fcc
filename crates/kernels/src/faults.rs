//! Planted faults for the kernel contract: a zero-sized no-op unless the `contract` feature is on.

/// Which planted control (if any) a kernel launch should apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    #[cfg(feature = "contract")]
    active: Option<&'static str>,
}

impl Faults {
    /// No fault: what the engine always passes.
    pub const NONE: Faults = Faults {
        #[cfg(feature = "contract")]
        active: None,
    };

    /// Activates control `name` (contract build only).
    #[cfg(feature = "contract")]
    pub fn planted(name: &'static str) -> Faults {
        Faults { active: Some(name) }
    }

    /// The planted control's name, if any; always `None` outside the contract build.
    #[inline(always)]
    pub fn active(&self) -> Option<&'static str> {
        #[cfg(feature = "contract")]
        {
            self.active
        }
        #[cfg(not(feature = "contract"))]
        {
            None
        }
    }

    /// Whether control `name` is planted in this launch; always false outside the contract build.
    #[inline(always)]
    pub fn on(&self, name: &str) -> bool {
        #[cfg(feature = "contract")]
        {
            self.active == Some(name)
        }
        #[cfg(not(feature = "contract"))]
        {
            let _ = name;
            false
        }
    }
}
