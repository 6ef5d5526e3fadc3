//! The outputs (monitors) as the compositor and xdg-output tell them, and the screen they
//! make together.

use super::*;

impl WlConn {
    pub fn monitors(&self) -> DisplayResult<Vec<MonitorInfo>> {
        let mut queue = self.lock_queue();
        self.dispatch_waiting(&mut queue)?;
        // A monitor plugged in since has been bound but not yet described: wait for that.
        if queue.state.outputs.iter().any(|o| o.rect().width == 0) {
            self.sync(&mut queue)?;
        }
        Ok(monitors_of(&queue.state))
    }

    pub fn screen(&self) -> DisplayResult<Rect> {
        let monitors = self.monitors()?;
        let mut rects = monitors.iter().map(|m| m.rect);
        let first = rects
            .next()
            .ok_or_else(|| failed("the compositor has no outputs"))?;
        Ok(rects.fold(first, |a, b| {
            let x = a.x.min(b.x);
            let y = a.y.min(b.y);
            let right =
                (i64::from(a.x) + i64::from(a.width)).max(i64::from(b.x) + i64::from(b.width));
            let bottom =
                (i64::from(a.y) + i64::from(a.height)).max(i64::from(b.y) + i64::from(b.height));
            Rect {
                x,
                y,
                width: (right - i64::from(x)) as u32,
                height: (bottom - i64::from(y)) as u32,
            }
        }))
    }
}

pub(super) fn monitors_of(state: &State) -> Vec<MonitorInfo> {
    state
        .outputs
        .iter()
        .enumerate()
        .map(|(index, o)| MonitorInfo {
            index,
            name: o.name.clone(),
            rect: o.rect(),
            // Wayland has no primary output; the first one stands for it.
            primary: index == 0,
        })
        .collect()
}

impl Output {
    /// The output's area in layout coordinates, which pointer input and windows use.
    pub(super) fn rect(&self) -> Rect {
        self.logical.unwrap_or_else(|| {
            let scale = self.scale.max(1);
            Rect {
                x: self.position.0,
                y: self.position.1,
                width: (self.mode.0 / scale).max(0) as u32,
                height: (self.mode.1 / scale).max(0) as u32,
            }
        })
    }
}

impl State {
    /// Binds the output `name` of the registry and asks for its layout area (xdg-output).
    pub(super) fn add_output(
        &mut self,
        registry: &WlRegistry,
        name: u32,
        version: u32,
        qh: &QueueHandle<Self>,
    ) {
        let output: WlOutput = registry.bind(name, version.min(4), qh, name);
        if let Some(manager) = &self.xdg_output_manager {
            manager.get_xdg_output(&output, qh, name);
        }
        self.outputs.push(Output {
            global: name,
            proxy: Some(output),
            scale: 1,
            ..Output::default()
        });
    }
}

impl Dispatch<WlOutput, u32> for State {
    fn event(
        state: &mut Self,
        _: &WlOutput,
        event: wl_output::Event,
        global: &u32,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.iter_mut().find(|o| o.global == *global) else {
            return;
        };
        match event {
            wl_output::Event::Geometry { x, y, .. } => output.position = (x, y),
            wl_output::Event::Mode {
                flags,
                width,
                height,
                ..
            } => {
                if matches!(flags, WEnum::Value(f) if f.contains(wl_output::Mode::Current)) {
                    output.mode = (width, height);
                }
            }
            wl_output::Event::Scale { factor } => output.scale = factor,
            wl_output::Event::Name { name } if output.name.is_empty() => output.name = name,
            _ => {}
        }
    }
}

impl Dispatch<ZxdgOutputV1, u32> for State {
    fn event(
        state: &mut Self,
        _: &ZxdgOutputV1,
        event: zxdg_output_v1::Event,
        global: &u32,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.iter_mut().find(|o| o.global == *global) else {
            return;
        };
        let logical = output.logical.get_or_insert(Rect {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
        });
        match event {
            zxdg_output_v1::Event::LogicalPosition { x, y } => {
                logical.x = x;
                logical.y = y;
            }
            zxdg_output_v1::Event::LogicalSize { width, height } => {
                logical.width = width.max(0) as u32;
                logical.height = height.max(0) as u32;
            }
            zxdg_output_v1::Event::Name { name } => output.name = name,
            _ => {}
        }
    }
}
