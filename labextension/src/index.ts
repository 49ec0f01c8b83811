// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ILayoutRestorer } from '@jupyterlab/application';
import {
  Clipboard,
  Dialog,
  ICommandPalette,
  InputDialog,
  MainAreaWidget,
  showDialog,
  WidgetTracker
} from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { ITerminal } from '@jupyterlab/terminal';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import {
  copyIcon,
  pasteIcon,
  refreshIcon,
  stopIcon
} from '@jupyterlab/ui-components';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { UUID } from '@lumino/coreutils';
import type { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';

import { listInstances } from './api';
import { toolIcon } from './icons';
import { ToolTerminalPanel } from './panel';
import { toolTerminalSettings } from './settings';
import type { IToolInstance } from './tokens';
import {
  CommandIDs,
  EXTENSION_ID,
  TERMINAL_SETTINGS_PLUGIN,
  TRANSLATION_DOMAIN
} from './tokens';

export { requestAPI, listInstances, createSession } from './api';
export {
  neutralizeBracketedPaste,
  ToolTerminalConnection,
  webSocketUrl
} from './connection';
export { ToolTerminalPanel } from './panel';
export { sanitizeSvg } from './icons';
export * from './tokens';

/**
 * The class of a tool terminal tab, for the tab context menu.
 */
const TAB_CLASS = 'jp-ToolTerminal-tab';

/**
 * How often the instance list is refreshed while the page is visible (ms).
 */
const POLL_INTERVAL = 10_000;

/**
 * The tool terminal plugin: launcher tiles, terminal panels and commands.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: `${EXTENSION_ID}:plugin`,
  description:
    "Terminals inside the user's own Docker tool instances, from the launcher.",
  autoStart: true,
  optional: [
    ICommandPalette,
    ILauncher,
    ILayoutRestorer,
    ISettingRegistry,
    ITranslator
  ],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const serverSettings = toolTerminalSettings(
      app.serviceManager.serverSettings
    );
    const category = trans.__('Tool Terminals');
    const tracker = new WidgetTracker<MainAreaWidget<ToolTerminalPanel>>({
      namespace: 'tool-terminal'
    });
    const instances = new Map<string, IToolInstance>();
    const tiles = new Map<string, { key: string; tile: IDisposable }>();
    const terminalOptions: Partial<ITerminal.IOptions> = {};

    /**
     * The title of a tool instance (launcher tile, tab).
     */
    const instanceTitle = (id: string): string => {
      const instance = instances.get(id);
      if (instance === undefined) {
        return id;
      }
      if (instance.status !== 'running') {
        return trans.__(
          '%1 (%2, %3)',
          instance.display_name,
          instance.id,
          instance.status
        );
      }
      return trans.__('%1 (%2)', instance.display_name, instance.id);
    };

    /**
     * Refresh the instance list and the launcher tiles.
     */
    const refresh = async (): Promise<void> => {
      const list = await listInstances(serverSettings);
      instances.clear();
      for (const instance of list) {
        instances.set(instance.id, instance);
      }
      if (launcher !== null) {
        list.forEach((instance, rank) => {
          const key = JSON.stringify([
            instance.display_name,
            instance.status,
            instance.icon ?? null,
            rank
          ]);
          const known = tiles.get(instance.id);
          if (known !== undefined && known.key === key) {
            return;
          }
          known?.tile.dispose();
          tiles.set(instance.id, {
            key,
            tile: launcher.add({
              command: CommandIDs.open,
              args: { instance: instance.id },
              category,
              rank
            })
          });
        });
        for (const [id, known] of Array.from(tiles.entries())) {
          if (!instances.has(id)) {
            known.tile.dispose();
            tiles.delete(id);
          }
        }
      }
      app.commands.notifyCommandChanged(CommandIDs.open);
    };

    const poll = new Poll({
      auto: true,
      factory: refresh,
      frequency: { interval: POLL_INTERVAL, backoff: true, max: 300_000 },
      name: `${EXTENSION_ID}:instances`,
      standby: 'when-hidden'
    });

    // Refresh as soon as a launcher is opened or shown.
    app.shell.currentChanged?.connect((_, change) => {
      const widget = change.newValue;
      if (
        widget !== null &&
        (widget.hasClass('jp-Launcher') ||
          widget.node.querySelector('.jp-Launcher') !== null)
      ) {
        void poll.refresh();
      }
    });

    /**
     * The tool terminal a command applies to: the one whose tab or body was
     * right-clicked when run from a context menu, the current one otherwise.
     */
    const target = (
      args: ReadonlyPartialJSONObject
    ): MainAreaWidget<ToolTerminalPanel> | null => {
      if (args.fromContextMenu === true) {
        const node = app.contextMenuHitTest(
          element =>
            tracker.find(w => w.id === (element.dataset.id ?? element.id)) !==
            undefined
        );
        if (node !== undefined) {
          const id = node.dataset.id ?? node.id;
          return tracker.find(w => w.id === id) ?? null;
        }
      }
      return tracker.currentWidget;
    };

    /**
     * Open a tool terminal panel on an instance.
     */
    const open = async (
      instance: string,
      session?: string,
      name?: string
    ): Promise<MainAreaWidget<ToolTerminalPanel>> => {
      const content = new ToolTerminalPanel({
        instance,
        serverSettings,
        translator: translator ?? nullTranslator,
        terminalOptions,
        sessionId: session
      });
      const widget = new MainAreaWidget({ content });
      widget.id = name ?? `tool-terminal-${UUID.uuid4()}`;
      const info = instances.get(instance);
      widget.title.label = instanceTitle(instance);
      widget.title.caption = trans.__('Terminal in tool instance %1', instance);
      widget.title.icon = toolIcon(info?.tool ?? '', info?.icon);
      widget.title.className = TAB_CLASS;
      widget.title.closable = true;
      content.sessionChanged.connect(() => {
        void tracker.save(widget);
      });
      void tracker.add(widget);
      app.shell.add(widget, 'main');
      app.shell.activateById(widget.id);
      await content.start().catch(() => {
        /* the panel shows the failure and offers to try again */
      });
      return widget;
    };

    app.commands.addCommand(CommandIDs.open, {
      label: args =>
        typeof args.instance === 'string'
          ? instanceTitle(args.instance)
          : trans.__('Open Tool Terminal…'),
      caption: args =>
        typeof args.instance === 'string'
          ? trans.__('Open a terminal in tool instance %1', args.instance)
          : trans.__('Open a terminal in one of your tool instances'),
      icon: args => {
        if (typeof args.instance !== 'string' || args.isPalette === true) {
          return undefined;
        }
        const info = instances.get(args.instance);
        return toolIcon(info?.tool ?? '', info?.icon);
      },
      describedBy: {
        args: {
          type: 'object',
          properties: {
            instance: {
              type: 'string',
              description: trans.__('The tool instance id')
            },
            session: {
              type: 'string',
              description: trans.__('A session to attach to, if still there')
            },
            name: {
              type: 'string',
              description: trans.__('The panel id (layout restoration)')
            }
          }
        }
      },
      execute: async args => {
        let instance = args.instance as string | undefined;
        if (typeof instance !== 'string') {
          await poll.refresh();
          await poll.tick;
          const running = Array.from(instances.values()).filter(
            i => i.status === 'running'
          );
          if (running.length === 0) {
            await showDialog({
              title: trans.__('Open Tool Terminal'),
              body: trans.__('You have no running tool instance.'),
              buttons: [Dialog.okButton({ label: trans.__('OK') })]
            });
            return;
          }
          const labels = running.map(i => instanceTitle(i.id));
          const result = await InputDialog.getItem({
            title: trans.__('Open Tool Terminal'),
            label: trans.__('Tool instance'),
            items: labels
          });
          if (!result.button.accept || result.value === null) {
            return;
          }
          instance = running[labels.indexOf(result.value)]?.id;
          if (instance === undefined) {
            return;
          }
        }
        return open(
          instance,
          typeof args.session === 'string' ? args.session : undefined,
          typeof args.name === 'string' ? args.name : undefined
        );
      }
    });

    app.commands.addCommand(CommandIDs.reset, {
      label: trans.__('Reset Tool Terminal Session'),
      caption: trans.__(
        'Kill the shell and everything it started, and run the startup command again in this panel'
      ),
      icon: args => (args.isPalette === true ? undefined : refreshIcon),
      isEnabled: args => target(args) !== null,
      describedBy: { args: { type: 'object', properties: {} } },
      execute: async args => {
        const widget = target(args);
        if (widget !== null) {
          await widget.content.reset();
          widget.content.activate();
        }
      }
    });

    app.commands.addCommand(CommandIDs.restart, {
      label: trans.__('New Tool Terminal Session'),
      caption: trans.__('Start a new session in this panel'),
      isEnabled: args => {
        const widget = target(args);
        return widget !== null && !widget.content.isLive;
      },
      describedBy: { args: { type: 'object', properties: {} } },
      execute: async args => {
        const widget = target(args);
        if (widget !== null) {
          await widget.content.restart();
          widget.content.activate();
        }
      }
    });

    app.commands.addCommand(CommandIDs.close, {
      label: trans.__('Close Tool Terminal Session'),
      caption: trans.__('Kill the session and close its panel'),
      icon: args => (args.isPalette === true ? undefined : stopIcon),
      isEnabled: args => target(args) !== null,
      describedBy: { args: { type: 'object', properties: {} } },
      execute: async args => {
        const widget = target(args);
        if (widget !== null) {
          try {
            await widget.content.closeSession();
          } finally {
            widget.dispose();
          }
        }
      }
    });

    app.commands.addCommand(CommandIDs.copy, {
      label: trans.__('Copy'),
      icon: copyIcon.bindprops({ stylesheet: 'menuItem' }),
      isEnabled: args =>
        target(args)?.content.terminal?.hasSelection() ?? false,
      describedBy: { args: { type: 'object', properties: {} } },
      execute: args => {
        const text = target(args)?.content.terminal?.getSelection();
        if (text) {
          Clipboard.copyToSystem(text);
        }
      }
    });

    app.commands.addCommand(CommandIDs.paste, {
      label: trans.__('Paste'),
      icon: pasteIcon.bindprops({ stylesheet: 'menuItem' }),
      isEnabled: args => target(args)?.content.terminal !== null,
      describedBy: { args: { type: 'object', properties: {} } },
      execute: async args => {
        const terminal = target(args)?.content.terminal;
        if (terminal) {
          const text = await navigator.clipboard.readText();
          if (text) {
            terminal.paste(text);
          }
        }
      }
    });

    app.commands.addCommand(CommandIDs.refresh, {
      label: trans.__('Refresh Tool Instances'),
      caption: trans.__('Refresh the launcher tiles of your tool instances'),
      describedBy: { args: { type: 'object', properties: {} } },
      execute: async () => {
        await poll.refresh();
        await poll.tick;
      }
    });

    const bodySelector = '.jp-ToolTerminal';
    const tabSelector = `.lm-DockPanel-tabBar .${TAB_CLASS}`;
    const fromContextMenu = { fromContextMenu: true };
    [
      [CommandIDs.copy, bodySelector, 0],
      [CommandIDs.paste, bodySelector, 1],
      [CommandIDs.reset, bodySelector, 2],
      [CommandIDs.restart, bodySelector, 3],
      [CommandIDs.close, bodySelector, 4],
      [CommandIDs.reset, tabSelector, 10],
      [CommandIDs.restart, tabSelector, 11],
      [CommandIDs.close, tabSelector, 12]
    ].forEach(([command, selector, rank]) => {
      app.contextMenu.addItem({
        command: command as string,
        selector: selector as string,
        rank: rank as number,
        args: fromContextMenu
      });
    });

    if (palette !== null) {
      for (const command of [
        CommandIDs.open,
        CommandIDs.reset,
        CommandIDs.restart,
        CommandIDs.close,
        CommandIDs.refresh
      ]) {
        palette.addItem({ command, category, args: { isPalette: true } });
      }
    }

    if (restorer !== null) {
      void restorer.restore(tracker, {
        command: CommandIDs.open,
        args: widget => ({
          instance: widget.content.instanceId,
          session: widget.content.sessionId ?? '',
          name: widget.id
        }),
        name: widget => widget.id
      });
    }

    if (settingRegistry !== null) {
      const apply = (settings: ISettingRegistry.ISettings): void => {
        const composite = settings.composite as Partial<ITerminal.IOptions>;
        for (const key of Object.keys(composite) as Array<
          keyof ITerminal.IOptions
        >) {
          const value = composite[key];
          if (value === undefined) {
            continue;
          }
          (terminalOptions as Record<string, unknown>)[key] = value;
          tracker.forEach(widget => {
            widget.content.setTerminalOption(key, value);
          });
        }
      };
      settingRegistry
        .load(TERMINAL_SETTINGS_PLUGIN)
        .then(settings => {
          apply(settings);
          settings.changed.connect(apply);
        })
        .catch(() => {
          // JupyterLab's terminal extension is disabled: use its defaults.
        });
    }
  }
};

export default plugin;
