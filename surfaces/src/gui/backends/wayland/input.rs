//! Input through the virtual pointer (`wlr-virtual-pointer`) and keyboard
//! (`virtual-keyboard-unstable-v1`, with the keymaps `keymap` makes per call).

use super::*;

impl WlConn {
    pub(super) fn pointer<'d>(
        &self,
        devices: &'d Devices,
    ) -> DisplayResult<&'d ZwlrVirtualPointerV1> {
        devices.pointer.as_ref().ok_or_else(|| {
            failed("the compositor offers no virtual pointer: pointer input is not possible here")
        })
    }

    /// Moves the pointer to a layout point: absolute motion over the whole layout's extent.
    pub(super) fn motion(
        &self,
        pointer: &ZwlrVirtualPointerV1,
        x: i32,
        y: i32,
    ) -> DisplayResult<()> {
        let screen = self.screen()?;
        pointer.motion_absolute(
            self.now(),
            (x - screen.x).max(0) as u32,
            (y - screen.y).max(0) as u32,
            screen.width,
            screen.height,
        );
        pointer.frame();
        Ok(())
    }

    pub(super) fn button(&self, pointer: &ZwlrVirtualPointerV1, button: Button, pressed: bool) {
        let code = match button {
            Button::Left => BTN_LEFT,
            Button::Right => BTN_RIGHT,
            Button::Middle => BTN_MIDDLE,
        };
        let state = if pressed {
            wl_pointer::ButtonState::Pressed
        } else {
            wl_pointer::ButtonState::Released
        };
        pointer.button(self.now(), code, state);
        pointer.frame();
    }

    /// Sends what input queued and waits until the compositor has handled it.
    pub(super) fn flush_input(&self) -> DisplayResult<()> {
        let mut queue = self.lock_queue();
        self.sync(&mut queue)
    }

    pub fn move_to(&self, x: i32, y: i32) -> DisplayResult<()> {
        let devices = self.lock_devices();
        self.motion(self.pointer(&devices)?, x, y)?;
        self.flush_input()
    }

    pub fn click(&self, at: Option<(i32, i32)>, button: Button, count: u32) -> DisplayResult<()> {
        let (x, y) = at.ok_or_else(no_cursor)?;
        let devices = self.lock_devices();
        let pointer = self.pointer(&devices)?;
        self.motion(pointer, x, y)?;
        for _ in 0..count {
            self.button(pointer, button, true);
            self.button(pointer, button, false);
        }
        self.flush_input()
    }

    pub fn drag(&self, from: (i32, i32), to: (i32, i32), button: Button) -> DisplayResult<()> {
        let devices = self.lock_devices();
        let pointer = self.pointer(&devices)?;
        self.motion(pointer, from.0, from.1)?;
        self.button(pointer, button, true);
        self.flush_input()?;
        const STEPS: i32 = 10;
        for step in 1..=STEPS {
            let x = from.0 + (to.0 - from.0) * step / STEPS;
            let y = from.1 + (to.1 - from.1) * step / STEPS;
            self.motion(pointer, x, y)?;
            self.flush_input()?;
        }
        self.button(pointer, button, false);
        self.flush_input()
    }

    pub fn scroll(&self, at: Option<(i32, i32)>, dx: i32, dy: i32) -> DisplayResult<()> {
        let (x, y) = at.ok_or_else(no_cursor)?;
        let devices = self.lock_devices();
        let pointer = self.pointer(&devices)?;
        self.motion(pointer, x, y)?;
        pointer.axis_source(wl_pointer::AxisSource::Wheel);
        for (axis, notches) in [
            (wl_pointer::Axis::VerticalScroll, dy),
            (wl_pointer::Axis::HorizontalScroll, dx),
        ] {
            if notches != 0 {
                pointer.axis_discrete(self.now(), axis, f64::from(notches) * NOTCH, notches);
            }
        }
        pointer.frame();
        self.flush_input()
    }

    pub(super) fn keyboard<'d>(
        &self,
        devices: &'d Devices,
    ) -> DisplayResult<&'d ZwpVirtualKeyboardV1> {
        devices.keyboard.as_ref().ok_or_else(|| {
            failed("the compositor offers no virtual keyboard: keyboard input is not possible here")
        })
    }

    /// Waits (bounded, once per keyboard) until the seat offers the virtual keyboard to
    /// clients: a client binds `wl_keyboard` only when the seat announces the capability, so keys
    /// sent before that reach nobody. This connection binds one too when the announcement comes
    /// (see the seat's handler), and the keymap arriving on it proves the compositor has
    /// announced the keyboard and handed out its keymap; the focused client got the same
    /// announcement in the same dispatch. A further roundtrip lets it bind before the keys.
    pub(super) fn keyboard_announced(&self, devices: &mut Devices) -> DisplayResult<()> {
        if devices.keyboard_announced {
            return Ok(());
        }
        let deadline = Instant::now() + REPLY_BOUND;
        let mut queue = self.lock_queue();
        while !queue.state.seat_keymap_seen {
            self.wait_event(
                &mut queue,
                deadline,
                "the seat's keyboard (the virtual keyboard was not announced to clients)",
            )?;
        }
        self.sync(&mut queue)?;
        devices.keyboard_announced = true;
        Ok(())
    }

    /// Puts `keysyms` on the keymap unless it holds them already.
    pub(super) fn ensure_layout(
        &self,
        devices: &mut Devices,
        keysyms: Vec<u32>,
    ) -> DisplayResult<()> {
        if devices.layout.holds(&keysyms) {
            return Ok(());
        }
        let layout = Layout::new(keysyms);
        upload(self.keyboard(devices)?, &layout)?;
        devices.layout = layout;
        Ok(())
    }

    pub(super) fn key(&self, keyboard: &ZwpVirtualKeyboardV1, code: u32, pressed: bool) {
        let state = if pressed {
            wl_keyboard::KeyState::Pressed
        } else {
            wl_keyboard::KeyState::Released
        };
        keyboard.key(self.now(), code, state);
    }

    pub fn type_text(&self, text: &str) -> DisplayResult<()> {
        let keysyms: Vec<u32> = text.chars().map(char_keysym).collect();
        let mut devices = self.lock_devices();
        self.keyboard(&devices)?;
        self.keyboard_announced(&mut devices)?;
        for (run, distinct) in keymap::rounds(&keysyms) {
            self.ensure_layout(&mut devices, distinct)?;
            let keyboard = self.keyboard(&devices)?;
            for &sym in run {
                let code = devices.layout.key_of(sym).ok_or_else(|| {
                    failed(format!("keysym {sym:#x} could not be put on the keymap"))
                })?;
                self.key(keyboard, code, true);
                self.key(keyboard, code, false);
            }
            self.flush_input()?;
        }
        Ok(())
    }

    pub fn press_combo(&self, combo: &Combo) -> DisplayResult<()> {
        let mut devices = self.lock_devices();
        self.keyboard(&devices)?;
        self.keyboard_announced(&mut devices)?;
        if let Some(modifier) = combo.modifiers.iter().find(|m| !keymap::is_modifier(**m)) {
            return Err(failed(format!(
                "modifier keysym {modifier:#x} has no key on the virtual keyboard"
            )));
        }
        if !keymap::is_modifier(combo.key) {
            let mut wanted = devices.layout.keysyms.clone();
            if !wanted.contains(&combo.key) {
                if wanted.len() == keymap::KEY_SLOTS {
                    wanted.clear();
                }
                wanted.push(combo.key);
            }
            self.ensure_layout(&mut devices, wanted)?;
        }
        let keyboard = self.keyboard(&devices)?;
        let key_of = |sym: u32| {
            devices
                .layout
                .key_of(sym)
                .ok_or_else(|| failed(format!("keysym {sym:#x} has no key")))
        };
        let mut held = Vec::new();
        for &modifier in &combo.modifiers {
            self.key(keyboard, key_of(modifier)?, true);
            held.push(modifier);
            keyboard.modifiers(keymap::modifier_mask(&held), 0, 0, 0);
        }
        let code = key_of(combo.key)?;
        self.key(keyboard, code, true);
        self.key(keyboard, code, false);
        while let Some(modifier) = held.pop() {
            self.key(keyboard, key_of(modifier)?, false);
            keyboard.modifiers(keymap::modifier_mask(&held), 0, 0, 0);
        }
        self.flush_input()
    }
}

/// The error for pointer input without a point: Wayland gives no client the pointer position.
pub(super) fn no_cursor() -> DisplayError {
    failed("the pointer position cannot be read on Wayland: give x and y")
}

/// Uploads `layout` as the virtual keyboard's keymap.
pub(super) fn upload(keyboard: &ZwpVirtualKeyboardV1, layout: &Layout) -> DisplayResult<()> {
    let text = layout.text();
    let mut file = shared_file("computer-keymap", 0)?;
    file.write_all(text.as_bytes())
        .map_err(|err| failed(format!("writing the keymap: {err}")))?;
    keyboard.keymap(
        wl_keyboard::KeymapFormat::XkbV1,
        file.as_fd(),
        text.len() as u32,
    );
    Ok(())
}
