// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Clipboard,
  Dialog,
  InputDialog,
  MainAreaWidget,
  showDialog
} from '@jupyterlab/apputils';
import type { WidgetTracker } from '@jupyterlab/apputils';
import type { ITerminal } from '@jupyterlab/terminal';
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';
import { nullTranslator } from '@jupyterlab/translation';
import {
  copyIcon,
  pasteIcon,
  refreshIcon,
  stopIcon
} from '@jupyterlab/ui-components';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { UUID } from '@lumino/coreutils';

import { toolIcon } from './icons';
import type { ToolInstances } from './instances';
import { instanceLabel } from './instances';
import { notesBody, notesSummary } from './notes';
import { ToolTerminalPanel } from './panel';
import { endedArg, sessionArg, trackSessions } from './restorer';
import type { ToolTerminalSessions } from './sessions';
import type { IToolTerminalPreferences } from './settings';
import type { IToolInstance, IToolTerminal } from './tokens';
import { CommandIDs, TRANSLATION_DOMAIN } from './tokens';

/**
 * The class of a tool terminal tab, for the tab context menu.
 */
export const TAB_CLASS = 'jp-ToolTerminal-tab';

/**
 * JupyterLab's find command (its search bar over the current widget).
 */
const FIND_COMMAND = 'documentsearch:start';

/**
 * The class of a stopped instance's launcher tile icon (the tile looks
 * stopped).
 */
export const STOPPED_CLASS = 'jp-ToolTerminal-stopped';

/**
 * Add the tool terminal commands (like JupyterLab's terminal extension's
 * `addCommands`): open, reset, new session, close, copy, paste and refresh.
 *
 * @param app - The application.
 * @param tracker - The tracker the opened panels are added to.
 * @param instances - The instance model (labels, icons, states).
 * @param options - The session model, translator and terminal options.
 */
export function addCommands(
  app: JupyterFrontEnd,
  tracker: WidgetTracker<MainAreaWidget<IToolTerminal>>,
  instances: ToolInstances,
  options: ICommandOptions
): void {
  const { commands } = app;
  const translator = options.translator ?? nullTranslator;
  const trans = translator.load(TRANSLATION_DOMAIN);
  const noArgs = { args: { type: 'object' as const, properties: {} } };

  /**
   * The tool terminal a command applies to: the one whose tab or body was
   * right-clicked when run from a context menu, the current one otherwise.
   */
  const target = (
    args: ReadonlyPartialJSONObject
  ): MainAreaWidget<IToolTerminal> | null => {
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
    session: string | undefined,
    name: string | undefined,
    ended: string | undefined
  ): Promise<MainAreaWidget<IToolTerminal>> => {
    const content = new ToolTerminalPanel({
      instance,
      sessions: options.sessions,
      translator,
      terminalOptions: options.terminalOptions,
      preferences: options.preferences,
      find: () => {
        if (commands.hasCommand(FIND_COMMAND)) {
          void commands.execute(FIND_COMMAND);
        }
      },
      sessionId: session,
      endMessage: ended
    });
    const widget = new MainAreaWidget({ content });
    widget.id = name ?? `tool-terminal-${UUID.uuid4()}`;
    widget.title.className = TAB_CLASS;
    widget.title.closable = true;
    trackSessions(tracker, widget);
    void tracker.add(widget);
    retitle();
    widget.disposed.connect(retitle);
    // The session (and the agent it may belong to) is known once attached.
    content.sessionChanged.connect(retitle);
    app.shell.add(widget, 'main');
    app.shell.activateById(widget.id);
    await content.start().catch(() => {
      /* the panel shows the failure and offers to try again */
    });
    return widget;
  };

  // What each panel's instance was last listed as: an instance removed
  // meanwhile keeps its display name in the tab.
  const known = new WeakMap<MainAreaWidget<IToolTerminal>, IToolInstance>();
  /**
   * Title every panel: its instance's display name, numbered when several
   * panels show the same instance (in the order they were opened).
   */
  const retitle = (): void => {
    const seen = new Map<string, number>();
    const panels: MainAreaWidget<IToolTerminal>[] = [];
    tracker.forEach(widget => {
      if (!widget.isDisposed) {
        panels.push(widget);
      }
    });
    const counts = new Map<string, number>();
    // The instances each display name stands for among the open panels: a
    // name that stands for several says which instance it is.
    const named = new Map<string, Set<string>>();
    for (const widget of panels) {
      const id = widget.content.instanceId;
      counts.set(id, (counts.get(id) ?? 0) + 1);
      const name = (instances.get(id) ?? known.get(widget))?.display_name ?? id;
      named.set(name, (named.get(name) ?? new Set()).add(id));
    }
    for (const widget of panels) {
      const id = widget.content.instanceId;
      const number = (seen.get(id) ?? 0) + 1;
      seen.set(id, number);
      const info = instances.get(id) ?? known.get(widget);
      if (info !== undefined) {
        known.set(widget, info);
      }
      const ambiguous = (named.get(info?.display_name ?? id)?.size ?? 0) > 1;
      setTitle(
        widget,
        info,
        trans,
        (counts.get(id) ?? 0) > 1 ? number : null,
        ambiguous
      );
    }
  };

  // Titles follow the instance list (a restored panel opens before it).
  instances.changed.connect(retitle);

  /**
   * Ask which running instance to open a terminal in; `undefined` when none
   * (the dialog said why) or the user cancelled.
   */
  const pick = async (): Promise<string | undefined> => {
    await instances.refresh();
    const title = trans.__('Open Tool Terminal');
    const ok = [Dialog.okButton({ label: trans.__('OK') })];
    if (instances.error !== null || instances.notes.length > 0) {
      await showDialog({
        title,
        body: notesBody(instances.error, instances.notes, trans),
        buttons: ok
      });
      return undefined;
    }
    const running = instances.list.filter(i => i.status === 'running');
    if (running.length === 0) {
      const stopped = instances.list.map(i => instanceLabel(i.id, i, trans));
      await showDialog({
        title,
        body:
          stopped.length === 0
            ? trans.__(
                'You have no tool instance: no container is labelled for you (jupyter-tool-terminal.owner), or none is running.'
              )
            : trans.__(
                'None of your tool instances is running: %1. Start one, then try again.',
                stopped.join(', ')
              ),
        buttons: ok
      });
      return undefined;
    }
    const labels = running.map(i => instanceLabel(i.id, i, trans));
    const result = await InputDialog.getItem({
      title,
      label: trans.__('Tool instance'),
      items: labels
    });
    if (!result.button.accept || result.value === null) {
      return undefined;
    }
    return running[labels.indexOf(result.value)]?.id;
  };

  commands.addCommand(CommandIDs.open, {
    label: args =>
      typeof args.instance === 'string'
        ? instanceLabel(args.instance, instances.get(args.instance), trans)
        : trans.__('Open Tool Terminal…'),
    caption: args => {
      if (typeof args.instance !== 'string') {
        return trans.__('Open a terminal in one of your tool instances');
      }
      const info = instances.get(args.instance);
      if (info !== undefined && info.status !== 'running') {
        return trans.__(
          'Tool instance %1 is %2: start it to open a terminal',
          args.instance,
          info.status
        );
      }
      return trans.__('Open a terminal in tool instance %1', args.instance);
    },
    icon: args => {
      if (typeof args.instance !== 'string' || args.isPalette === true) {
        return undefined;
      }
      const info = instances.get(args.instance);
      const icon = toolIcon(info?.tool ?? '', info?.icon);
      // (The launcher drops `iconClass` for an icon it can resolve.)
      return info !== undefined && info.status !== 'running'
        ? icon.bindprops({ className: STOPPED_CLASS })
        : icon;
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
            description: trans.__('A session to reattach to, if still there')
          },
          name: {
            type: 'string',
            description: trans.__('The panel id (layout restoration)')
          }
        }
      }
    },
    execute: async args => {
      const name = typeof args.name === 'string' ? args.name : undefined;
      let instance: string | undefined =
        typeof args.instance === 'string' ? args.instance : undefined;
      if (instance === undefined) {
        instance = await pick();
        if (instance === undefined) {
          return;
        }
      } else if (name === undefined) {
        // A tile clicked: a stopped instance opens no empty tab. A restored
        // panel (named) opens anyway and says what became of its session.
        const info = instances.get(instance);
        if (info !== undefined && info.status !== 'running') {
          await showDialog({
            title: trans.__('Open Tool Terminal'),
            body: trans.__(
              'The tool instance %1 (%2) is %3. Start it, then open a terminal again.',
              info.display_name,
              instance,
              info.status
            ),
            buttons: [Dialog.okButton({ label: trans.__('OK') })]
          });
          return;
        }
      }
      return open(instance, sessionArg(args), name, endedArg(args));
    }
  });

  const noPanel = trans.__('Open a tool terminal first');

  commands.addCommand(CommandIDs.reset, {
    label: trans.__('Reset Tool Terminal Session'),
    caption: args =>
      target(args) === null
        ? noPanel
        : trans.__(
            'Kill the shell and everything it started, and run the startup command again in this panel'
          ),
    icon: args => (args.isPalette === true ? undefined : refreshIcon),
    isEnabled: args => target(args) !== null,
    describedBy: noArgs,
    execute: async args => {
      const widget = target(args);
      if (widget !== null) {
        await widget.content.reset();
        widget.content.activate();
      }
    }
  });

  commands.addCommand(CommandIDs.restart, {
    label: trans.__('New Tool Terminal Session'),
    caption: args => {
      const widget = target(args);
      if (widget === null) {
        return noPanel;
      }
      return widget.content.isLive
        ? trans.__(
            'The session is still running: use Reset to start its shell again'
          )
        : trans.__('Start a new session in this panel');
    },
    isEnabled: args => {
      const widget = target(args);
      return widget !== null && !widget.content.isLive;
    },
    // Offered only where it can run: not beside a live session (in the menus
    // and the palette alike).
    isVisible: args => {
      const widget = target(args);
      return widget !== null && !widget.content.isLive;
    },
    describedBy: noArgs,
    execute: async args => {
      const widget = target(args);
      if (widget !== null) {
        await widget.content.restart();
        widget.content.activate();
      }
    }
  });

  commands.addCommand(CommandIDs.close, {
    label: trans.__('Shut Down Tool Terminal Session'),
    caption: args =>
      target(args) === null
        ? noPanel
        : trans.__(
            'Shut the session down (its shell and everything it started are killed) and close its panel'
          ),
    icon: args => (args.isPalette === true ? undefined : stopIcon),
    isEnabled: args => target(args) !== null,
    describedBy: noArgs,
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

  commands.addCommand(CommandIDs.copy, {
    label: trans.__('Copy'),
    caption: args =>
      target(args)?.content.terminal?.hasSelection()
        ? trans.__('Copy the selection')
        : trans.__('Select text in the terminal to copy it'),
    icon: copyIcon.bindprops({ stylesheet: 'menuItem' }),
    isEnabled: args => target(args)?.content.terminal?.hasSelection() ?? false,
    describedBy: noArgs,
    execute: args => {
      const text = target(args)?.content.terminal?.getSelection();
      if (text) {
        Clipboard.copyToSystem(text);
      }
    }
  });

  commands.addCommand(CommandIDs.paste, {
    label: trans.__('Paste'),
    caption: args =>
      (target(args)?.content.terminal ?? null) === null
        ? trans.__('The terminal has no session yet')
        : trans.__('Paste the clipboard into the terminal'),
    icon: pasteIcon.bindprops({ stylesheet: 'menuItem' }),
    isEnabled: args => (target(args)?.content.terminal ?? null) !== null,
    describedBy: noArgs,
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

  // Why the launcher shows no instance, if it says why (an error, or notes).
  const unexplained = () =>
    instances.error === null && instances.notes.length === 0;
  const statusLabel = () =>
    instances.error !== null
      ? trans.__('Tool instances unavailable')
      : trans.__('No tool instance to show');

  commands.addCommand(CommandIDs.refresh, {
    // On the launcher (args.launcher) this is the tile that says why no
    // instance is listed.
    label: args =>
      args.launcher === true && !unexplained()
        ? statusLabel()
        : trans.__('Refresh Tool Instances'),
    caption: args => {
      if (args.launcher !== true || unexplained()) {
        return trans.__('Refresh the launcher tiles of your tool instances');
      }
      const why = [instances.error ?? '', notesSummary(instances.notes)];
      return trans.__('%1 Click for details.', why.join(' ').trim());
    },
    icon: args =>
      args.launcher === true
        ? refreshIcon.bindprops({ className: STOPPED_CLASS })
        : undefined,
    describedBy: noArgs,
    execute: async args => {
      await instances.refresh();
      if (args.launcher === true && !unexplained()) {
        await showDialog({
          title: statusLabel(),
          body: notesBody(instances.error, instances.notes, trans),
          buttons: [Dialog.okButton({ label: trans.__('OK') })]
        });
      }
    }
  });
}

/**
 * What {@link addCommands} needs besides the application.
 */
export interface ICommandOptions {
  /**
   * The page's session model.
   */
  sessions: ToolTerminalSessions;

  /**
   * The translator.
   */
  translator?: ITranslator | null;

  /**
   * The user's terminal options, shared by every panel (the settings
   * plugin updates them in place).
   */
  terminalOptions: Partial<ITerminal.IOptions>;

  /**
   * The extension's own settings, shared by every panel (updated in place).
   */
  preferences?: IToolTerminalPreferences;
}

/**
 * Set a panel's tab title: the instance's display name first (readable in a
 * narrow tab), numbered when several panels show the same instance, the
 * rest in the tooltip.
 *
 * @param widget - The panel.
 * @param info - The instance as last listed, if known.
 * @param trans - The translation bundle.
 * @param number - The panel's number among those of its instance, or `null`
 *   when it is the only one.
 * @param withInstance - Whether the title names the instance too (another
 *   open panel's instance has the same display name).
 */
export function setTitle(
  widget: MainAreaWidget<IToolTerminal>,
  info: IToolInstance | undefined,
  trans: TranslationBundle,
  number: number | null = null,
  withInstance = false
): void {
  const id = widget.content.instanceId;
  const agent = widget.content.session?.agent;
  const display = info?.display_name ?? id;
  // An agent's terminal says whose it is (the owner watches it here).
  const name = agent
    ? trans.__('%1 — agent: %2', display, agent.name)
    : display;
  if (withInstance && display !== id) {
    widget.title.label =
      number === null
        ? trans.__('%1 (%2)', name, id)
        : trans.__('%1 (%2, %3)', name, id, number);
  } else {
    widget.title.label =
      number === null ? name : trans.__('%1 (%2)', name, number);
  }
  const where =
    info === undefined
      ? trans.__('tool instance %1', id)
      : trans.__(
          'tool instance %1 (%2, %3)',
          id,
          info.display_name,
          info.status
        );
  widget.title.caption =
    number === null
      ? trans.__('Terminal in %1', where)
      : trans.__('Terminal %1 in %2', number, where);
  if (agent) {
    widget.title.caption = trans.__(
      '%1, opened by agent %2',
      widget.title.caption,
      agent.name
    );
  }
  widget.title.icon = toolIcon(info?.tool ?? '', info?.icon);
}
