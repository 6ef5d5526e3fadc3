//! AXUIElement for the macOS backends (ax, and gui's focus): an owned element with typed
//! attribute reads and writes, actions, a messaging timeout, and the Accessibility permission
//! check whose failure says how to grant it.

use std::ffi::c_void;

use accessibility_sys::{
    AXError, AXIsProcessTrusted, AXUIElementCopyActionNames, AXUIElementCopyAttributeValue,
    AXUIElementCreateApplication, AXUIElementCreateSystemWide, AXUIElementGetPid,
    AXUIElementGetTypeID, AXUIElementIsAttributeSettable, AXUIElementPerformAction, AXUIElementRef,
    AXUIElementSetAttributeValue, AXUIElementSetMessagingTimeout, AXValueGetType, AXValueGetValue,
    AXValueRef, kAXErrorAPIDisabled, kAXErrorActionUnsupported, kAXErrorAttributeUnsupported,
    kAXErrorCannotComplete, kAXErrorInvalidUIElement, kAXErrorNoValue, kAXErrorNotImplemented,
    kAXErrorSuccess, kAXValueTypeCGPoint, kAXValueTypeCGSize,
};
use core_foundation::array::{CFArray, CFArrayRef};
use core_foundation::base::{
    CFEqual, CFGetTypeID, CFHash, CFRelease, CFRetain, CFType, CFTypeRef, TCFType,
};
use core_foundation::boolean::CFBoolean;
use core_foundation::number::CFNumber;
use core_foundation::string::CFString;

/// Why an accessibility call failed.
#[derive(Debug, Clone)]
pub enum AxError {
    /// This process is not trusted for accessibility.
    NotTrusted,
    /// The app did not answer within the messaging timeout.
    Timeout,
    /// The element no longer exists.
    Gone,
    /// The element does not support the attribute or action.
    Unsupported,
    Other(String),
}

impl AxError {
    fn from_code(code: AXError, what: &str) -> AxError {
        match code {
            c if c == kAXErrorAPIDisabled => AxError::NotTrusted,
            c if c == kAXErrorCannotComplete => AxError::Timeout,
            c if c == kAXErrorInvalidUIElement => AxError::Gone,
            c if c == kAXErrorAttributeUnsupported
                || c == kAXErrorActionUnsupported
                || c == kAXErrorNotImplemented =>
            {
                AxError::Unsupported
            }
            c => AxError::Other(format!("{what} failed with AXError {c}")),
        }
    }
}

pub type AxResult<T> = Result<T, AxError>;

/// Whether this process may use the accessibility API (and post input events).
pub fn trusted() -> bool {
    // SAFETY: no arguments; reads the process's TCC state.
    unsafe { AXIsProcessTrusted() }
}

/// The actionable message for a missing privacy permission: which one, for which binary, where.
pub fn grant_message(permission: &str) -> String {
    let binary = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "the computer binary".into());
    format!(
        "this process lacks the {permission} permission; grant {permission} to {binary} in System Settings > Privacy & Security > {permission}, then retry (restart the daemon if it still fails)"
    )
}

/// An owned (+1 retained) AXUIElement.
pub struct Element(AXUIElementRef);

// SAFETY: AXUIElementRef is an immutable CoreFoundation object; retain/release are thread-safe
// and the accessibility API may be called from any thread.
unsafe impl Send for Element {}
unsafe impl Sync for Element {}

impl Drop for Element {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { CFRelease(self.0 as CFTypeRef) }
    }
}

impl Clone for Element {
    fn clone(&self) -> Element {
        // SAFETY: retaining a live object we hold a reference to.
        unsafe { CFRetain(self.0 as CFTypeRef) };
        Element(self.0)
    }
}

impl PartialEq for Element {
    fn eq(&self, other: &Element) -> bool {
        // SAFETY: both are live CF objects.
        unsafe { CFEqual(self.0 as CFTypeRef, other.0 as CFTypeRef) != 0 }
    }
}

impl Eq for Element {}

// Equal elements have equal CFHash, as `Eq` requires; the ref table keys on it.
impl std::hash::Hash for Element {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash_code());
    }
}

impl std::fmt::Debug for Element {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AXUIElement({:p})", self.0)
    }
}

fn cf_str(name: &str) -> CFString {
    CFString::new(name)
}

impl Element {
    /// Retains an element seen inside a container the caller holds.
    fn retained(raw: *const c_void) -> Option<Element> {
        if raw.is_null() {
            return None;
        }
        // SAFETY: raw is a live CF object owned by a container we hold.
        let is_element = unsafe { CFGetTypeID(raw) == AXUIElementGetTypeID() };
        if !is_element {
            return None;
        }
        // SAFETY: as above; the retain gives us our own reference.
        unsafe { CFRetain(raw) };
        Some(Element(raw as AXUIElementRef))
    }

    pub fn application(pid: i32) -> Element {
        // SAFETY: creates a new element (+1) for the pid; never null for a valid call.
        Element(unsafe { AXUIElementCreateApplication(pid) })
    }

    pub fn system_wide() -> Element {
        // SAFETY: as above.
        Element(unsafe { AXUIElementCreateSystemWide() })
    }

    /// A number that is equal for equal elements (CFHash), for the ref table.
    pub fn hash_code(&self) -> u64 {
        // SAFETY: live CF object.
        unsafe { CFHash(self.0 as CFTypeRef) as u64 }
    }

    pub fn pid(&self) -> Option<i32> {
        let mut pid = 0;
        // SAFETY: writes the pid into our local.
        let code = unsafe { AXUIElementGetPid(self.0, &mut pid) };
        (code == kAXErrorSuccess).then_some(pid)
    }

    /// How long calls to this element (to the whole app, for an application element; to every
    /// app, for the system-wide element) may wait for an answer.
    pub fn set_timeout(&self, seconds: f32) {
        // SAFETY: plain setter on a live element.
        unsafe { AXUIElementSetMessagingTimeout(self.0, seconds) };
    }

    /// An attribute's value; None when the element has no such attribute or no value for it.
    pub fn attribute(&self, name: &str) -> AxResult<Option<CFType>> {
        let key = cf_str(name);
        let mut value: CFTypeRef = std::ptr::null();
        // SAFETY: the out pointer receives a +1 reference on success.
        let code =
            unsafe { AXUIElementCopyAttributeValue(self.0, key.as_concrete_TypeRef(), &mut value) };
        match code {
            c if c == kAXErrorSuccess && !value.is_null() => {
                // SAFETY: a +1 reference we now own.
                Ok(Some(unsafe { CFType::wrap_under_create_rule(value) }))
            }
            c if c == kAXErrorSuccess
                || c == kAXErrorNoValue
                || c == kAXErrorAttributeUnsupported
                || c == kAXErrorNotImplemented =>
            {
                Ok(None)
            }
            c => Err(AxError::from_code(c, name)),
        }
    }

    pub fn string(&self, name: &str) -> AxResult<Option<String>> {
        Ok(self
            .attribute(name)?
            .and_then(|v| v.downcast::<CFString>())
            .map(|s| s.to_string()))
    }

    pub fn boolean(&self, name: &str) -> AxResult<Option<bool>> {
        Ok(self.attribute(name)?.and_then(|v| {
            v.downcast::<CFBoolean>().map(bool::from).or_else(|| {
                v.downcast::<CFNumber>()
                    .and_then(|n| n.to_i64())
                    .map(|n| n != 0)
            })
        }))
    }

    /// A value as text: strings as they are, numbers formatted, booleans as 0/1 (how AppKit
    /// reports a checkbox's state).
    pub fn value_text(&self, name: &str) -> AxResult<Option<String>> {
        Ok(self.attribute(name)?.and_then(|v| {
            if let Some(s) = v.downcast::<CFString>() {
                Some(s.to_string())
            } else if let Some(n) = v.downcast::<CFNumber>() {
                n.to_i64()
                    .filter(|_| n.to_f64().is_some_and(|f| f.fract() == 0.0))
                    .map(|i| i.to_string())
                    .or_else(|| n.to_f64().map(|f| f.to_string()))
            } else {
                v.downcast::<CFBoolean>()
                    .map(|b| if bool::from(b) { "1" } else { "0" }.to_string())
            }
        }))
    }

    /// An attribute holding one element (AXParent, AXFocusedUIElement, AXFocusedWindow...).
    pub fn element(&self, name: &str) -> AxResult<Option<Element>> {
        Ok(self
            .attribute(name)?
            .and_then(|v| Element::retained(v.as_CFTypeRef())))
    }

    /// An attribute holding elements (AXChildren, AXWindows...).
    pub fn elements(&self, name: &str) -> AxResult<Vec<Element>> {
        let Some(value) = self.attribute(name)? else {
            return Ok(Vec::new());
        };
        let Some(array) = value.downcast::<CFArray>() else {
            return Ok(Vec::new());
        };
        Ok(array
            .iter()
            .filter_map(|item| Element::retained(*item))
            .collect())
    }

    /// AXPosition + AXSize as (x, y, width, height) in global points.
    pub fn frame(&self) -> AxResult<Option<(i32, i32, i32, i32)>> {
        let position = self.attribute("AXPosition")?;
        let size = self.attribute("AXSize")?;
        let (Some(position), Some(size)) = (position, size) else {
            return Ok(None);
        };
        let mut point = [0f64; 2];
        let mut extent = [0f64; 2];
        // SAFETY: CGPoint and CGSize are two f64s each; AXValueGetValue checks the type and
        // writes exactly that much.
        let ok = unsafe {
            let p = position.as_CFTypeRef() as AXValueRef;
            let s = size.as_CFTypeRef() as AXValueRef;
            AXValueGetType(p) == kAXValueTypeCGPoint
                && AXValueGetType(s) == kAXValueTypeCGSize
                && AXValueGetValue(p, kAXValueTypeCGPoint, point.as_mut_ptr().cast())
                && AXValueGetValue(s, kAXValueTypeCGSize, extent.as_mut_ptr().cast())
        };
        Ok(ok.then(|| {
            (
                point[0].round() as i32,
                point[1].round() as i32,
                extent[0].round() as i32,
                extent[1].round() as i32,
            )
        }))
    }

    /// The element's action names (AXPress, AXShowMenu...).
    pub fn action_names(&self) -> AxResult<Vec<String>> {
        let mut names: CFArrayRef = std::ptr::null();
        // SAFETY: the out pointer receives a +1 array of CFStrings on success.
        let code = unsafe { AXUIElementCopyActionNames(self.0, &mut names) };
        if code != kAXErrorSuccess {
            return match AxError::from_code(code, "listing actions") {
                AxError::Unsupported => Ok(Vec::new()),
                err => Err(err),
            };
        }
        if names.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: a +1 CFArray we now own, holding CFStrings.
        let array: CFArray<CFString> = unsafe { CFArray::wrap_under_create_rule(names) };
        Ok(array.iter().map(|name| name.to_string()).collect())
    }

    pub fn perform(&self, action: &str) -> AxResult<()> {
        let name = cf_str(action);
        // SAFETY: live element, live string.
        let code = unsafe { AXUIElementPerformAction(self.0, name.as_concrete_TypeRef()) };
        if code == kAXErrorSuccess {
            Ok(())
        } else {
            Err(AxError::from_code(code, action))
        }
    }

    pub fn set(&self, name: &str, value: &CFType) -> AxResult<()> {
        let key = cf_str(name);
        // SAFETY: live element, key and value; the call retains what it keeps.
        let code = unsafe {
            AXUIElementSetAttributeValue(self.0, key.as_concrete_TypeRef(), value.as_CFTypeRef())
        };
        if code == kAXErrorSuccess {
            Ok(())
        } else {
            Err(AxError::from_code(code, name))
        }
    }

    pub fn settable(&self, name: &str) -> bool {
        let key = cf_str(name);
        let mut settable: u8 = 0;
        // SAFETY: writes one byte into our local.
        let code = unsafe {
            AXUIElementIsAttributeSettable(self.0, key.as_concrete_TypeRef(), &mut settable)
        };
        code == kAXErrorSuccess && settable != 0
    }
}
